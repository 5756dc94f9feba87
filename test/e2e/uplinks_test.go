//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/uplink"
	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
)

// TestPerNodeUplinks: the three nodes' VLAN uplinks have different names.
// node-2 gets a second port on the lab's switch named ens5, which the lab's
// estuary values (underlay.vlanUplinks: [ens5, eth0]) prefer; node-3 gets
// one named bond0 and the annotation networking.estuary.io/uplink-vlan
// naming it; node-1 keeps eth0. Each daemon publishes its choice and
// `kubectl estuary status` prints it; a VLAN network's pods on the three
// nodes are proxied on their node's own uplink and reach the external host
// and each other. An annotation naming only a missing link takes node-2's
// VLAN network off the node (on no other link) with a problem and a
// Warning UplinkNotFound naming it, and removing it brings ens5 back; a
// malformed annotation is refused with a Warning and changes nothing.
func TestPerNodeUplinks(t *testing.T) {
	e := needLab(t)
	if e.kubeadm != nil {
		t.Skip("needs the lab's own estuary values (underlay.vlanUplinks); a kubeadm lab installs estuary from docs/install.md")
	}
	const n1, n2, n3 = "node-1", "node-2", "node-3"
	want := map[string]string{n1: "eth0", n2: lab.LabAltUplink, n3: "bond0"}
	e.addSwitchPort(t, n2, lab.LabAltUplink)
	e.addSwitchPort(t, n3, "bond0")
	vlanKey := uplink.Annotation(uplink.VLAN)
	e.annotateNode(t, n3, vlanKey, "bond0,eth0")
	for n, link := range want {
		source := "config"
		if n == n3 {
			source = "annotation"
		}
		e.waitUplink(t, n, "vlan", link, source, "")
	}

	e.labelNodes(t, rackLabel, rackValue, n1, n2, n3)
	e.createUnderlay(t)
	ns := e.newNamespace(t, "uplinks")
	e.mustCreate(t, ns, underlayPod("a", n1), underlayPod("b", n2), underlayPod("c", n3))
	pods := e.waitPods(t, ns, "a", "b", "c")

	t.Run("each node proxies its pods on its own uplink", func(t *testing.T) {
		for _, p := range pods {
			e.waitProxied(t, p.Spec.NodeName, p.Status.PodIP, want[p.Spec.NodeName])
		}
	})
	t.Run("external host and pods reach each other", func(t *testing.T) {
		for _, p := range pods {
			u := fmt.Sprintf("http://%s:%d/clientip", p.Status.PodIP, httpPort)
			eventually(t, "external -> "+u, reachTimeout, func(ctx context.Context) error {
				_, err := httpGet(ctx, e.externalNetns, u)
				return err
			})
		}
		a, b, c := pods["a"], pods["b"], pods["c"]
		checkPing(t, "b -> c", e.podNetns(t, &b), c.Status.PodIP, 3)
		checkPing(t, "c -> a", e.podNetns(t, &c), a.Status.PodIP, 3)
	})
	t.Run("kubectl estuary status names each node's uplink", func(t *testing.T) {
		plugin := e.plugin(t)
		eventually(t, "status names the VLAN uplinks", time.Minute, func(ctx context.Context) error {
			r := e.status(ctx, plugin)
			for n, link := range want {
				fact := "uplinks vlan " + link
				if n == n3 {
					fact += " (node annotation)"
				}
				if !statusLineHas(r.out, n, fact) {
					return fmt.Errorf("no line for %s with %q:\n%s", n, fact, r.out)
				}
			}
			return nil
		})
	})
	t.Run("no candidate: network off the node, problem and Event", func(t *testing.T) {
		since := time.Now().Add(-time.Second)
		b := pods["b"]
		e.annotateNode(t, n2, vlanKey, "nosuch0")
		e.waitUplink(t, n2, "vlan", "", "annotation", "nosuch0")
		e.waitNodeEvent(t, n2, "UplinkNotFound", since)
		e.waitNotProxied(t, n2, b.Status.PodIP, lab.LabAltUplink, "eth0")
		e.setNodeAnnotation(t, n2, vlanKey, nil)
		e.waitUplink(t, n2, "vlan", lab.LabAltUplink, "config", "")
		e.waitProxied(t, n2, b.Status.PodIP, lab.LabAltUplink)
	})
	t.Run("malformed annotation refused, nothing changed", func(t *testing.T) {
		since := time.Now().Add(-time.Second)
		e.annotateNode(t, n3, vlanKey, "bond0/x")
		e.waitUplink(t, n3, "vlan", "bond0", "annotation", fmt.Sprintf("annotation %s=%q on node %s refused", vlanKey, "bond0/x", n3))
		e.waitNodeEvent(t, n3, "UplinkAnnotationRefused", since)
		c := pods["c"]
		e.waitProxied(t, n3, c.Status.PodIP, "bond0")
	})
}

// addSwitchPort connects node to the lab's switch with one more veth,
// named name on the node, and removes it when the test ends.
func (e *labEnv) addSwitchPort(t *testing.T, node, name string) {
	t.Helper()
	switchNS, port := lab.Prefix+"-switch", "upl-"+node
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "-n", switchNS, "link", "del", port).CombinedOutput(); err != nil {
			t.Errorf("remove %s from the switch: %v: %s", port, err, out)
		}
	})
	// br0 is the switch's bridge (test/infra/lab network.go).
	if err := netlab.Veth(switchNS, port, "br0", filepath.Base(e.nodeNetns[node]), name); err != nil {
		t.Fatalf("connect %s of %s to the switch: %v", name, node, err)
	}
}

// annotateNode sets an annotation on node and removes it when the test
// ends.
func (e *labEnv) annotateNode(t *testing.T, node, key, value string) {
	t.Helper()
	t.Cleanup(func() { e.setNodeAnnotation(t, node, key, nil) })
	e.setNodeAnnotation(t, node, key, value)
}

// setNodeAnnotation sets (nil: removes) an annotation on node.
func (e *labEnv) setNodeAnnotation(t *testing.T, node, key string, value any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := e.c.Patch(testCtx(t, time.Minute), n, client.RawPatch(types.MergePatchType, b)); err != nil {
		t.Errorf("annotate %s %s=%v: %v", node, key, value, err)
	}
}

// waitUplink waits until node's daemon publishes mode's link from source,
// with a problem saying problem ("" none).
func (e *labEnv) waitUplink(t *testing.T, node, mode, link, source, problem string) {
	t.Helper()
	what := fmt.Sprintf("node %s publishes %s uplink %q from %s, problem %q", node, mode, link, source, problem)
	eventually(t, what, 90*time.Second, func(ctx context.Context) error {
		var n corev1.Node
		if err := e.c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			return err
		}
		var st estuaryv1.NodeDaemonStatus
		if err := json.Unmarshal([]byte(n.Annotations[estuaryv1.AnnotationDaemonStatus]), &st); err != nil {
			return fmt.Errorf("daemon status: %w", err)
		}
		i := slices.IndexFunc(st.Uplinks, func(u estuaryv1.NodeUplinkStatus) bool { return u.Mode == mode })
		if i < 0 {
			return fmt.Errorf("no %s uplink in %+v", mode, st.Uplinks)
		}
		u := st.Uplinks[i]
		if u.Link != link || u.Source != source || (problem == "") != (u.Problem == "") || !strings.Contains(u.Problem, problem) {
			return fmt.Errorf("published %+v", u)
		}
		return nil
	})
}

// waitProxied waits until node answers for ip on link (a proxy neighbour).
func (e *labEnv) waitProxied(t *testing.T, node, ip, link string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s proxies %s on %s", node, ip, link), time.Minute, func(context.Context) error {
		if !e.proxied(t, node, ip, link) {
			return fmt.Errorf("no proxy neighbour %s on %s", ip, link)
		}
		return nil
	})
}

// waitNotProxied waits until node answers for ip on none of links.
func (e *labEnv) waitNotProxied(t *testing.T, node, ip string, links ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s proxies %s on none of %v", node, ip, links), time.Minute, func(context.Context) error {
		for _, l := range links {
			if e.proxied(t, node, ip, l) {
				return fmt.Errorf("still proxied on %s", l)
			}
		}
		return nil
	})
}

// proxied says whether node has a proxy neighbour for ip on link.
func (e *labEnv) proxied(t *testing.T, node, ip, link string) bool {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+e.nodeNetns[node], "ip", "neigh", "show", "proxy", "dev", link).CombinedOutput()
	if err != nil {
		t.Fatalf("ip neigh show proxy dev %s on %s: %v: %s", link, node, err, out)
	}
	return slices.ContainsFunc(strings.Split(string(out), "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 0 && f[0] == ip
	})
}

// statusLineHas says whether status output has a line about object that
// holds fact.
func statusLineHas(out, object, fact string) bool {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[2] == object && strings.Contains(l, fact) {
			return true
		}
	}
	return false
}
