package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/uplink"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestUplinkChoiceOnNode runs the uplink choice over real links (a network
// namespace with veth links) and the status reporter over a real API
// server: the first configured candidate that exists is chosen and
// published; a link that appears earlier in the list takes over; the
// Node's annotation overrides the list; a mode none of whose candidates
// exists is a problem naming them with one Warning UplinkNotFound, gone
// once one exists; a malformed annotation is refused (problem and Warning
// naming it and the node) and changes nothing: the value accepted before it
// stays in use.
func TestUplinkChoiceOnNode(t *testing.T) {
	ns := nstest.New(t)
	nstest.IP(t, ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p")
	nstest.IP(t, ns, "addr", "add", "192.0.2.10/24", "dev", "eth0")
	nstest.IP(t, ns, "link", "set", "eth0", "up")
	nstest.IP(t, ns, "route", "add", "default", "via", "192.0.2.1", "dev", "eth0")
	agent, err := overlay.NewAgent(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)

	_, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx := context.Background()
	const node = "node-u"
	if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	u := newUplinks(Config{NodeName: node, VLANUplinks: []string{"bond0", "eth0"}, BGPUplinks: []string{"ens5f0"}}, agent)
	ev := &recorded{}
	r := &statusReporter{node: node, reader: k8s, writer: k8s, events: ev, dir: filepath.Join(t.TempDir(), "net.d"),
		list: NewConflist("/run/estuary/cni.sock", 30*time.Second), fastPath: estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathOff},
		uplinks: u.status, interval: time.Second}
	pass := func(what string) map[string]estuaryv1.NodeUplinkStatus {
		t.Helper()
		var n corev1.Node
		if err := k8s.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			t.Fatal(err)
		}
		u.observe(&n)
		if err := r.pass(ctx); err != nil {
			t.Fatalf("%s: status pass: %v", what, err)
		}
		st, _ := nodeStatus(t, k8s, node)
		out := map[string]estuaryv1.NodeUplinkStatus{}
		for _, s := range st.Uplinks {
			out[s.Mode] = s
		}
		return out
	}
	annotate := func(kv map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": kv}})
		if err := k8s.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch("application/merge-patch+json", b)); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, got estuaryv1.NodeUplinkStatus, link, source string, problem ...string) {
		t.Helper()
		if got.Link != link || got.Source != source {
			t.Errorf("%s: %s uplink %q from %s, want %q from %s (%+v)", what, got.Mode, got.Link, got.Source, link, source, got)
		}
		if len(problem) == 0 && got.Problem != "" {
			t.Errorf("%s: %s uplink has problem %q, want none", what, got.Mode, got.Problem)
		}
		for _, p := range problem {
			if !strings.Contains(got.Problem, p) {
				t.Errorf("%s: %s uplink problem %q does not say %q", what, got.Mode, got.Problem, p)
			}
		}
	}

	st := pass("config lists")
	want("config lists", st["vlan"], "eth0", "config")
	want("config lists", st["bgp"], "", "config", "no bgp candidate", "ens5f0", node)
	want("config lists", st["vxlan"], "eth0", "default")
	if got := reasons(ev.take()); !slices.Equal(got, []string{ReasonUplinkNotFound}) {
		t.Errorf("config lists: recorded %v, want [%s]", got, ReasonUplinkNotFound)
	}
	if _, err := u.choose(uplink.BGP); err == nil {
		t.Error("bgp: chose a link though no candidate exists")
	}

	nstest.IP(t, ns, "link", "add", "bond0", "type", "veth", "peer", "name", "bond0p")
	st = pass("bond0 appeared")
	want("bond0 appeared", st["vlan"], "bond0", "config")
	if got := reasons(ev.take()); len(got) != 0 {
		t.Errorf("bond0 appeared: recorded %v again, want nothing new", got)
	}

	annotate(map[string]any{uplink.Annotation(uplink.VLAN): "ens5,eth0", uplink.Annotation(uplink.BGP): "bond0"})
	st = pass("annotations")
	want("annotations", st["vlan"], "eth0", "annotation")
	want("annotations", st["bgp"], "bond0", "annotation")
	if got := u.underlayLinks(); !slices.Equal(got, []string{"eth0", "bond0"}) {
		t.Errorf("annotations: underlay links %v, want [eth0 bond0]", got)
	}

	annotate(map[string]any{uplink.Annotation(uplink.VLAN): "eth0/1"})
	st = pass("malformed annotation")
	want("malformed annotation", st["vlan"], "eth0", "annotation",
		fmt.Sprintf("annotation %s=%q on node %s refused", uplink.Annotation(uplink.VLAN), "eth0/1", node))
	if got := reasons(ev.take()); !slices.Equal(got, []string{ReasonUplinkRefused}) {
		t.Errorf("malformed annotation: recorded %v, want [%s]", got, ReasonUplinkRefused)
	}

	annotate(map[string]any{uplink.Annotation(uplink.VLAN): nil, uplink.Annotation(uplink.VXLAN): "ens5f0"})
	st = pass("no vxlan candidate")
	want("no vxlan candidate", st["vxlan"], "", "annotation", "no vxlan candidate link with a global address", "ens5f0")
	if _, err := u.parent(); err == nil || !strings.Contains(err.Error(), "ens5f0") {
		t.Errorf("tunnel parent with no candidate: %v, want an error naming ens5f0", err)
	}
}
