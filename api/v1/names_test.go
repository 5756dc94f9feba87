package v1

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestInstanceName(t *testing.T) {
	cases := map[string]string{
		"10.240.0.7":         "10.240.0.7",
		"fd00:1::7":          "fd00-1--7",
		"fd00:1::":           "fd00-1--0",
		"::7":                "0--7",
		"::":                 "0--0",
		"fd00:1:2:3:4:5:6:7": "fd00-1-2-3-4-5-6-7",
	}
	seen := map[string]string{}
	for in, want := range cases {
		got := InstanceName(netip.MustParseAddr(in))
		if got != want {
			t.Errorf("InstanceName(%s) = %q, want %q", in, got, want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("InstanceName(%s) = %q is not a valid object name: %v", in, got, errs)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s share the name %q", in, other, got)
		}
		seen[got] = in
	}
}
