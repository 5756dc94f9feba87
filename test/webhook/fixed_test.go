package webhook

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// fixedFixture: the pod fixture, with ov4's 10.0.9.0-10.0.9.9 excluded and
// 10.0.0.50 recorded for Deployment default/holder.
func fixedFixture() []client.Object {
	objs := podFixture()
	for _, o := range objs {
		if s, ok := o.(*estuaryv1.Subnet); ok && s.Name == "ov4" {
			s.Spec.Range.ExcludeIPs = []estuaryv1.AddressOrRange{"10.0.9.0-10.0.9.9"}
		}
	}
	held := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.50"},
		Spec: estuaryv1.IPInstanceSpec{Network: "ov", Subnet: "ov4",
			Address: estuaryv1.InstanceAddress{IP: "10.0.0.50/16", Version: 4},
			Binding: estuaryv1.Binding{Namespace: "default", PodName: "holder-1", Owner: estuaryv1.OwnerReference{Kind: "Deployment", Name: "holder"}}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound},
	}
	return append(objs, held)
}

func TestFixedAddressDenials(t *testing.T) {
	seed(t, fixedFixture()...)
	runDenials(t, fixedDenials())
}

func fixedDenials() []denial {
	pod := func(a map[string]string) client.Object { return podObj("default", "p", a) }
	ip, pool := estuaryv1.AnnotationIPAddress, estuaryv1.AnnotationIPPool
	mac, macs := estuaryv1.AnnotationMACAddress, estuaryv1.AnnotationMACPool
	return []denial{
		{name: "ip-address not an IP", create: pod(sel(ip, "10.0.0.x")),
			want: []string{`pod "default/p"`, ann(ip), `"10.0.0.x" is not an IP address`}},
		{name: "ip-address outside every subnet", create: pod(sel(ip, "192.168.0.5")),
			want: []string{`pod "default/p"`, ann(ip), "192.168.0.5", `outside every subnet of network "ov"`}},
		{name: "ip-address outside the named subnet", create: pod(sel(ip, "10.1.0.5", annSub, "ov4")),
			want: []string{`pod "default/p"`, ann(ip), "10.1.0.5", "outside every subnet named by", "ov4"}},
		{name: "ip-address excluded", create: pod(sel(ip, "10.0.9.3")),
			want: []string{`pod "default/p"`, ann(ip), "10.0.9.3", "excluded range"}},
		{name: "ip-address is the network address", create: pod(sel(ip, "10.0.0.0")),
			want: []string{`pod "default/p"`, ann(ip), "network address"}},
		{name: "ip-address held by another workload", create: pod(sel(ip, "10.0.0.50")),
			want: []string{`pod "default/p"`, ann(ip), "10.0.0.50 is used by Deployment default/holder"}},
		{name: "ip-address held by the Deployment a forged reference names",
			create: podObj("default", "p", sel(ip, "10.0.0.50"), forgedOwner("Deployment", "holder", "not-its-uid")),
			want:   []string{`pod "default/p"`, ann(ip), "10.0.0.50 is used by Deployment default/holder"}},
		{name: "ip-address two of one family", create: pod(sel(ip, "10.0.0.5,10.0.0.6")),
			want: []string{`pod "default/p"`, ann(ip), "two IPv4 addresses"}},
		{name: "ip-address of a family the pod does not ask for", create: pod(sel(ip, "fd00::5", annFam, "IPv4")),
			want: []string{`pod "default/p"`, ann(ip), "fd00::5 is IPv6", "IPv4 only"}},
		{name: "ip-address and ip-pool", create: pod(sel(ip, "10.0.0.5", pool, "10.0.0.6")),
			want: []string{`pod "default/p"`, ann(ip), "not both"}},
		{name: "ip-pool mixes families", create: pod(sel(pool, "10.0.0.5,fd00::5")),
			want: []string{`pod "default/p"`, ann(pool), "mixes families", "entry 1 is IPv6"}},
		{name: "ip-pool names an address twice", create: pod(sel(pool, "10.0.0.5,10.0.0.5")),
			want: []string{`pod "default/p"`, ann(pool), "10.0.0.5 twice"}},
		{name: "ip-pool entry outside the network", create: pod(sel(pool, "10.0.0.5,10.2.0.5")),
			want: []string{`pod "default/p"`, ann(pool), "entry 1: 10.2.0.5", `outside every subnet of network "ov"`}},
		{name: "ip-pool entry not an IP", create: pod(sel(pool, "10.0.0.5,nope")),
			want: []string{`pod "default/p"`, ann(pool), "entry 1", `"nope" is not an IP address`}},
		{name: "mac-address not a MAC", create: pod(sel(mac, "0a:00:00")),
			want: []string{`pod "default/p"`, ann(mac), "not a 48-bit MAC address"}},
		{name: "mac-address multicast", create: pod(sel(mac, "01:00:5e:00:00:01")),
			want: []string{`pod "default/p"`, ann(mac), "multicast"}},
		{name: "mac-pool names a MAC twice", create: pod(sel(macs, "0a:00:00:00:00:01,0A:00:00:00:00:01")),
			want: []string{`pod "default/p"`, ann(macs), "0a:00:00:00:00:01 twice"}},
		{name: "ip-retain not a boolean", create: pod(sel(estuaryv1.AnnotationIPRetain, "yes")),
			want: []string{`pod "default/p"`, ann(estuaryv1.AnnotationIPRetain), `"yes" is not true or false`}},
		{name: "ip-retain-ttl not a duration", create: pod(sel(estuaryv1.AnnotationIPRetainTTL, "-5m")),
			want: []string{`pod "default/p"`, ann(estuaryv1.AnnotationIPRetainTTL), "not a positive duration"}},
	}
}

// Valid fixed-address annotations are admitted.
func TestFixedAddressAdmitted(t *testing.T) {
	seed(t, fixedFixture()...)
	create(t,
		podObj("default", "one", sel(estuaryv1.AnnotationIPAddress, "10.0.0.60,fd00::60", estuaryv1.AnnotationMACAddress, "0a:58:0a:00:00:3c")),
		podObj("default", "pooled", sel(estuaryv1.AnnotationIPPool, "10.0.0.61/fd00::61,10.0.0.62/fd00::62",
			estuaryv1.AnnotationMACPool, "0a:58:0a:00:00:3d,0a:58:0a:00:00:3e", estuaryv1.AnnotationIPRetain, "true",
			estuaryv1.AnnotationIPRetainTTL, "2h")),
	)
}
