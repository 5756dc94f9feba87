package webhook

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

func TestFamiliesNeeded(t *testing.T) {
	n := overlay("ov")
	private := subnet("p6", "ov", "fd00:9::/64")
	private.Spec.Private = true
	subnets := []estuaryv1.Subnet{subnet("a4", "ov", "10.0.0.0/16"), private, subnet("other6", "other", "fd00:1::/64")}
	dual := append(slices.Clone(subnets), subnet("a6", "ov", "fd00:2::/64"))
	v4, v6 := family.IPv4, family.IPv6
	cases := []struct {
		name    string
		sel     netmodel.Selection
		subnets []estuaryv1.Subnet
		want    []family.Family
	}{
		{"public families only", netmodel.Selection{}, subnets, []family.Family{v4}},
		{"dual-stack network", netmodel.Selection{}, dual, []family.Family{v4, v6}},
		{"ip-family IPv6", netmodel.Selection{IPFamily: estuaryv1.IPFamilyIPv6}, dual, []family.Family{v6}},
		{"ip-family DualStack", netmodel.Selection{IPFamily: estuaryv1.IPFamilyDualStack}, subnets, []family.Family{v4, v6}},
		{"named subnets", netmodel.Selection{Subnets: []string{"a4"}, IPFamily: estuaryv1.IPFamilyIPv4}, subnets, nil},
		{"no public subnet", netmodel.Selection{}, []estuaryv1.Subnet{private}, nil},
	}
	for _, c := range cases {
		if got := netmodel.FamiliesNeeded(&c.sel, &n, c.subnets); !slices.Equal(got, c.want) {
			t.Errorf("%s: families %v, want %v", c.name, got, c.want)
		}
	}
	reqs := AvailabilityRequirements("ov", []family.Family{v4, v6})
	if len(reqs) != 2 || reqs[0].Key != "networking.estuary.io/ipv4-available-ov" || reqs[1].Key != "networking.estuary.io/ipv6-available-ov" ||
		reqs[0].Operator != "NotIn" || !slices.Equal(reqs[0].Values, []string{"false"}) {
		t.Errorf("requirements %+v", reqs)
	}
}

func TestConfigurationPolicies(t *testing.T) {
	v, m := Configurations(Service{Namespace: "kube-system", Name: "estuary-webhook", Port: 443})
	for _, w := range v.Webhooks[:2] {
		if *w.FailurePolicy != admissionregistrationv1.Fail || *w.TimeoutSeconds != DefaultTimeoutSeconds {
			t.Errorf("%s: failurePolicy %s timeout %d; want Fail, %d", w.Name, *w.FailurePolicy, *w.TimeoutSeconds, DefaultTimeoutSeconds)
		}
	}
	pod, mut := v.Webhooks[2], m.Webhooks[0]
	if *pod.FailurePolicy != admissionregistrationv1.Ignore || *mut.FailurePolicy != admissionregistrationv1.Ignore ||
		*pod.TimeoutSeconds != DefaultPodTimeoutSeconds || *mut.TimeoutSeconds != DefaultPodTimeoutSeconds {
		t.Errorf("pod webhooks: failurePolicy %s/%s timeout %d/%d; want Ignore, %d", *pod.FailurePolicy, *mut.FailurePolicy,
			*pod.TimeoutSeconds, *mut.TimeoutSeconds, DefaultPodTimeoutSeconds)
	}
	if vals := pod.NamespaceSelector.MatchExpressions[0].Values; !slices.Equal(vals, []string{"kube-system"}) {
		t.Errorf("namespace selector values %v for a webhook in kube-system; want [kube-system]", vals)
	}
}
