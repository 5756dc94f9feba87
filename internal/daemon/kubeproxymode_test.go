package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestStatusReporterKubeProxyIPVS runs the reporter against a real API
// server and a real HTTP server answering /proxyMode as kube-proxy does:
// in iptables mode the node status names the mode and no problem; when
// kube-proxy answers ipvs the status carries the IPVS problem and one
// Warning PolicyBypassedByIPVS is recorded, not repeated by a later pass
// or by a restarted daemon; back to iptables the problem goes. Without
// policy the status has no policy part.
func TestStatusReporterKubeProxyIPVS(t *testing.T) {
	_, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx := context.Background()
	for _, name := range []string{"node-p", "node-q"} {
		if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	var mode atomic.Value
	mode.Store("iptables")
	kp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/proxyMode" {
			http.NotFound(w, r)
			return
		}
		_, _ = fmt.Fprint(w, mode.Load())
	}))
	t.Cleanup(kp.Close)
	detect := datapath.ProxyModeDetector{URL: kp.URL + "/proxyMode"}.Detect
	ev := &recorded{}
	dir := filepath.Join(t.TempDir(), "net.d")
	newReporter := func(node string, m kubeProxyModeFunc) *statusReporter {
		return &statusReporter{node: node, reader: k8s, writer: k8s, events: ev, dir: dir,
			list: NewConflist("/run/estuary/cni.sock", 30*time.Second), kubeProxyMode: m, interval: time.Second,
			fastPath: estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathLoaded}}
	}
	r := newReporter("node-p", detect)
	pass := func(what string) (*estuaryv1.NodePolicyStatus, string) {
		t.Helper()
		if err := r.pass(ctx); err != nil {
			t.Fatalf("%s: pass: %v", what, err)
		}
		st, rv := nodeStatus(t, k8s, r.node)
		if st == nil {
			t.Fatalf("%s: no status published", what)
		}
		return st.Policy, rv
	}

	if p, _ := pass("iptables"); p == nil || *p != (estuaryv1.NodePolicyStatus{KubeProxyMode: "iptables"}) {
		t.Fatalf("kube-proxy in iptables mode: policy status %+v", p)
	}
	if got := ev.take(); len(got) != 0 {
		t.Errorf("iptables mode recorded %v", got)
	}

	mode.Store("ipvs")
	p, rv := pass("ipvs")
	if p == nil || p.KubeProxyMode != "ipvs" || !strings.Contains(p.Problem, "IPVS mode") || !strings.Contains(p.Problem, "ingress policy") {
		t.Fatalf("kube-proxy in IPVS mode: policy status %+v, want the IPVS problem", p)
	}
	if got := ev.take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonPolicyBypassedByIPVS+": kube-proxy runs in IPVS mode") {
		t.Fatalf("IPVS mode recorded %q, want one Warning %s", got, ReasonPolicyBypassedByIPVS)
	}
	if _, rv2 := pass("ipvs again"); rv2 != rv {
		t.Errorf("an unchanged IPVS status wrote the Node again (resourceVersion %s -> %s)", rv, rv2)
	}
	r = newReporter("node-p", detect)
	pass("restarted daemon, ipvs")
	if got := ev.take(); len(got) != 0 {
		t.Errorf("a later pass or a restarted daemon recorded %v again", got)
	}

	mode.Store("iptables")
	if p, _ := pass("back to iptables"); p == nil || p.Problem != "" || p.KubeProxyMode != "iptables" {
		t.Errorf("back in iptables mode: policy status %+v, want no problem", p)
	}
	if got := ev.take(); len(got) != 0 {
		t.Errorf("the problem going recorded %v", got)
	}

	r = newReporter("node-q", nil)
	mode.Store("ipvs")
	if p, _ := pass("policy off"); p != nil {
		t.Errorf("without policy the status has a policy part %+v", p)
	}
	if got := reasons(ev.take()); slices.Contains(got, ReasonPolicyBypassedByIPVS) {
		t.Errorf("without policy IPVS recorded %v", got)
	}
}
