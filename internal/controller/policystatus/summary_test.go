package policystatus

import (
	"fmt"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/policytranslate"
)

// TestSummaryFitsTheAPIsLimits: however many problems, an Event's note
// stays within the 1,024 bytes events.k8s.io takes and says how many it
// left out; problems that fit are all there.
func TestSummaryFitsTheAPIsLimits(t *testing.T) {
	var probs []policytranslate.Problem
	for i := range 100 {
		probs = append(probs, policytranslate.Problem{Field: fmt.Sprintf("spec.ingress[%d].from[0].ipBlock.cidr", i), Message: "cannot be read (rule dropped)"})
	}
	note := summary("not enforced as written: ", probs, maxNote)
	if len(note) > maxNote || !strings.HasPrefix(note, "not enforced as written: spec.ingress[0].from[0].ipBlock.cidr: ") {
		t.Fatalf("note of %d bytes: %q", len(note), note)
	}
	shown := strings.Count(note, "ipBlock.cidr")
	if want := fmt.Sprintf("; and %d more", 100-shown); !strings.HasSuffix(note, want) {
		t.Errorf("note %q does not end with %q", note, want)
	}
	if all := summary("x: ", probs[:2], maxNote); all != "x: "+probs[0].String()+"; "+probs[1].String() {
		t.Errorf("two problems: %q", all)
	}
}
