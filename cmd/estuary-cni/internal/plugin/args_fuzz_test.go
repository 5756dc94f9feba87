package plugin

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/protobuf/proto"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
)

// podKeys are the CNI_ARGS keys ParseArgs reads, and where each goes.
var podKeys = map[string]func(*PodArgs) *string{
	"K8S_POD_NAMESPACE": func(p *PodArgs) *string { return &p.Namespace },
	"K8S_POD_NAME":      func(p *PodArgs) *string { return &p.Name },
	"K8S_POD_UID":       func(p *PodArgs) *string { return &p.UID },
}

// argsOracle is what CNI_ARGS means, written apart from ParseArgs: pairs
// separated by ';', empty pairs skipped, each KEY=VALUE split at its first
// '=', the last of a key winning. bad names why it is refused, or "".
func argsOracle(s string) (p PodArgs, bad string) {
	for _, pair := range strings.Split(s, ";") {
		if pair == "" {
			continue
		}
		i := strings.IndexByte(pair, '=')
		if i <= 0 {
			return PodArgs{}, "not KEY=VALUE"
		}
		if field, ok := podKeys[pair[:i]]; ok {
			if !utf8.ValidString(pair[i+1:]) {
				return PodArgs{}, "not UTF-8"
			}
			*field(&p) = pair[i+1:]
		}
	}
	return p, ""
}

// FuzzParseArgs: ParseArgs never panics; it refuses exactly what is not a
// list of KEY=VALUE pairs, or a pod value that is not UTF-8, with an
// invalid-environment CNI error naming CNI_ARGS; what it accepts is the
// last value of each pod key, written back as CNI_ARGS it reads the same,
// and it can be sent to the daemon (protobuf strings are UTF-8).
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=1234;",
		"K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=4b1e-8f2a",
		"",
		";;",
		"K8S_POD_NAME=a;K8S_POD_NAME=b",
		"K8S_POD_NAME=a=b",
		"K8S_POD_NAME=",
		"k8s_pod_name=lower",
		"K8S_POD_NAME",
		"=x",
		"a=b;junk",
		"K8S_POD_NAME=\xff",
		"OTHER=\xff;K8S_POD_UID=u",
		"K8S_POD_NAMESPACE=a\nb",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, bad := argsOracle(s)
		p, err := ParseArgs(s)
		if err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(e.Msg, "CNI_ARGS") {
				t.Fatalf("ParseArgs(%q) = %v, want an invalid-environment error naming CNI_ARGS", s, err)
			}
			if bad == "" {
				t.Fatalf("ParseArgs(%q) refused well-formed CNI_ARGS: %v", s, err)
			}
			return
		}
		if bad != "" {
			t.Fatalf("ParseArgs(%q) = %+v, want a refusal (%s)", s, p, bad)
		}
		if p != want {
			t.Fatalf("ParseArgs(%q) = %+v, want %+v", s, p, want)
		}
		again, err := ParseArgs("K8S_POD_NAMESPACE=" + p.Namespace + ";K8S_POD_NAME=" + p.Name + ";K8S_POD_UID=" + p.UID)
		if err != nil || again != p {
			t.Fatalf("written back, %+v reads as %+v (%v)", p, again, err)
		}
		req := &cniv1.CmdArgs{Pod: &cniv1.PodRef{Namespace: p.Namespace, Name: p.Name, Uid: p.UID}}
		if _, err := proto.Marshal(req); err != nil {
			t.Fatalf("pod %+v from CNI_ARGS %q cannot be sent to the daemon: %v", p, s, err)
		}
	})
}
