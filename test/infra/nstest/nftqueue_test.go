package nstest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeNFTQueueAgreesWithNft: the probe's answer is the nft command's
// for the same rule in another fresh namespace, on whatever kernel runs
// the test.
func TestProbeNFTQueueAgreesWithNft(t *testing.T) {
	RequireRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed")
	}
	ns := New(t)
	script := "add table inet probe; add chain inet probe c { type filter hook forward priority 0; }; "
	if out, err := exec.Command("ip", "netns", "exec", filepath.Base(ns), "nft", script+"add rule inet probe c accept").CombinedOutput(); err != nil {
		t.Fatalf("nft without a queue statement: %v\n%s", err, out)
	}
	out, nftErr := exec.Command("ip", "netns", "exec", filepath.Base(ns), "nft", "add rule inet probe c queue num 100 bypass").CombinedOutput()
	err := ProbeNFTQueue(t)
	t.Logf("nft: %v %s; probe: %v", nftErr, strings.TrimSpace(string(out)), err)
	if (err == nil) != (nftErr == nil) {
		t.Fatalf("probe says %v, nft says %v", err, nftErr)
	}
	if err != nil && !strings.Contains(err.Error(), "queue num 100 bypass") {
		t.Errorf("probe error %q does not name the refused rule", err)
	}
}
