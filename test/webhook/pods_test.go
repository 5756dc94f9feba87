package webhook

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podFixture is the cluster the pod cases run in: an Overlay network "ov"
// with IPv4 subnets ov4 and ov4b and IPv6 subnet ov6, and a VLAN network
// "u1" over rack r1 with IPv4 subnet u4.
func podFixture() []client.Object {
	return []client.Object{
		overlayNet("ov"), underlayNet("u1", vlan, sel("rack", "r1")),
		subnetObj("ov4", "ov", "10.0.0.0/16"), subnetObj("ov6", "ov", "fd00::/64"),
		subnetObj("ov4b", "ov", "10.1.0.0/16"), subnetObj("u4", "u1", "10.2.0.0/24", gw("10.2.0.1")),
	}
}

func TestPodDenials(t *testing.T) {
	seed(t, podFixture()...)
	runDenials(t, podDenials())
}

func TestPodDenialsWithoutOverlay(t *testing.T) {
	seed(t, underlayNet("u1", vlan, sel("rack", "r1")))
	runDenials(t, podDenialsWithoutOverlay())
}

func podDenials() []denial {
	pod := func(a map[string]string, opts ...podOpt) client.Object { return podObj("default", "p", a, opts...) }
	inNS := func(ns string, a map[string]string) client.Object { return podObj(ns, "p", a) }
	return []denial{
		{name: "missing network", create: pod(sel(annNet, "nope")),
			want: []string{`pod "default/p"`, ann(annNet), `network "nope"`, "does not exist"}},
		{name: "missing subnet", create: pod(sel(annSub, "nope")),
			want: []string{`pod "default/p"`, ann(annSub), `subnet "nope"`, "does not exist"}},
		{name: "subnet of another network", create: pod(sel(annNet, "u1", annSub, "ov4")),
			want: []string{`pod "default/p"`, ann(annSub), `subnet "ov4"`, `spec.network is "ov"`, `"u1"`}},
		{name: "subnets of two networks", create: pod(sel(annSub, "ov4,u4")),
			want: []string{`pod "default/p"`, ann(annSub), `subnet "ov4"`, `subnet "u4"`, "spec.network differ"}},
		{name: "two subnets of one family, one of another network", create: pod(sel(annSub, "ov4,ov4b,u4")),
			want: []string{`pod "default/p"`, ann(annSub), `subnet "ov4"`, `subnet "u4"`, "spec.network differ"}},
		{name: "seventeen subnets", create: pod(sel(annSub, "ov4,ov4b,ov6,a,b,c,d,e,f,g,h,i,j,k,l,m,n")),
			want: []string{`pod "default/p"`, ann(annSub), "17 subnets", "at most 16"}},
		{name: "one subnet twice", create: pod(sel(annSub, "ov4, ov4")),
			want: []string{`pod "default/p"`, ann(annSub), `subnet "ov4" twice`}},
		{name: "empty subnet name", create: pod(sel(annSub, "ov4,")),
			want: []string{`pod "default/p"`, ann(annSub), `"" is not a valid subnet name`}},
		{name: "invalid network name", create: pod(sel(annNet, "Bad_Name")),
			want: []string{`pod "default/p"`, ann(annNet), `"Bad_Name" is not a valid network name`}},
		{name: "Underlay requested, overlay named", create: pod(sel(annNet, "ov", annType, "Underlay")),
			want: []string{`pod "default/p"`, ann(annType), `network "ov"`, "spec.type is Overlay"}},
		{name: "Overlay requested, underlay subnet named", create: pod(sel(annSub, "u4", annType, "Overlay")),
			want: []string{`pod "default/p"`, ann(annType), `network "u1"`, "spec.type is Underlay"}},
		{name: "Underlay requested by type, no Underlay network has IPv6", create: pod(sel(annType, "Underlay", annFam, "IPv6")),
			want: []string{`pod "default/p"`, ann(annType), "no network or subnet is named", "no Underlay network", "[IPv6]"}},
		{name: "network type in lower case", create: pod(sel(annType, "underlay")),
			want: []string{`pod "default/p"`, ann(annType), `"underlay" is not Overlay, Underlay or GlobalBGP`}},
		{name: "unknown IP family", create: pod(sel(annFam, "IPv5")),
			want: []string{`pod "default/p"`, ann(annFam), `"IPv5"`}},
		{name: "generated name, missing network", create: pod(sel(annNet, "nope"), generated("web-")),
			want: []string{`pod "default/web-`, ann(annNet), `network "nope"`}},
		{name: "inherited missing network",
			seed:   []client.Object{nsObj("inherit-net", sel(annNet, "nope"))},
			create: inNS("inherit-net", nil),
			want:   []string{`pod "inherit-net/p"`, ann(annNet) + ` (inherited from namespace "inherit-net")`, `network "nope"`}},
		{name: "inherited type against the pod's network",
			seed:   []client.Object{nsObj("inherit-type", sel(annType, "Underlay"))},
			create: inNS("inherit-type", sel(annNet, "ov")),
			want:   []string{`pod "inherit-type/p"`, ann(annType) + ` (inherited from namespace "inherit-type")`, `network "ov"`}},
		{name: "pod's subnet against the inherited network",
			seed:   []client.Object{nsObj("inherit-sub", sel(annNet, "u1"))},
			create: inNS("inherit-sub", sel(annSub, "ov4")),
			want:   []string{`pod "inherit-sub/p"`, ann(annSub), `subnet "ov4"`, `"u1"`}},
		{name: "inherited invalid subnet list",
			seed:   []client.Object{nsObj("inherit-bad", sel(annSub, "ov4,ov4b,ov4"))},
			create: inNS("inherit-bad", nil),
			want:   []string{`pod "inherit-bad/p"`, ann(annSub) + ` (inherited from namespace "inherit-bad")`, `subnet "ov4" twice`}},
	}
}

func podDenialsWithoutOverlay() []denial {
	return []denial{
		{name: "Overlay requested, none exists", create: podObj("default", "p", sel(annType, "Overlay")),
			want: []string{`pod "default/p"`, ann(annType), "no Overlay network"}},
		{name: "family only, no Overlay to default to", create: podObj("default", "p", sel(annFam, "IPv4")),
			want: []string{`pod "default/p"`, ann(annNet), "no Overlay network"}},
	}
}
