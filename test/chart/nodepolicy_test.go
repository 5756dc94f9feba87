package chart

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/testenv"
)

// TestDaemonMayPatchOnlyItsOwnNode installs the chart's RBAC and its
// admission policy and patches Nodes as the daemon of node vap-self would
// (its bound token names the node): its own networking.estuary.io/
// annotations go through; another Node, its labels, other annotations, or a
// token that names no node are refused with the policy's message.
func TestDaemonMayPatchOnlyItsOwnNode(t *testing.T) {
	ensureNamespace(t)
	objs := render(t)
	installRBAC(t, objs)
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		obj := find(t, objs, kind, "estuary-daemon-own-node").DeepCopy()
		if err := k8s.Create(ctx(t), obj); err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx(t), obj) })
	}
	for _, name := range []string{"vap-self", "vap-other"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": "r1"},
			Annotations: map[string]string{"owner": "ops"}}}
		if err := k8s.Create(ctx(t), n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx(t), n) })
	}
	daemon := daemonClient(t, "vap-self")
	patch := func(c client.Client, node, body string) error {
		return c.Patch(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	own := `{"metadata":{"annotations":{"networking.estuary.io/vtep-ip":"10.0.0.1"}}}`
	testenv.Eventually(t, "the policy in force (the daemon may not patch another Node)", 30*time.Second, func() error {
		err := patch(daemon, "vap-other", own)
		if err == nil {
			return errors.New("patch of another node admitted")
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the Node it runs on") {
			return fmt.Errorf("refused for another reason: %w", err)
		}
		return nil
	})
	if err := patch(daemon, "vap-self", own); err != nil {
		t.Errorf("the daemon may not patch its own VTEP annotation: %v", err)
	}
	for _, c := range []struct{ what, body, want string }{
		{"a label", `{"metadata":{"labels":{"rack":"r2"}}}`, "labels or spec"},
		{"another annotation", `{"metadata":{"annotations":{"owner":"me"}}}`, "only networking.estuary.io/ annotations"},
		{"removing another annotation", `{"metadata":{"annotations":{"owner":null}}}`, "only networking.estuary.io/ annotations"},
		{"its spec", `{"spec":{"unschedulable":true}}`, "labels or spec"},
	} {
		err := patch(daemon, "vap-self", c.body)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("the daemon changing %s of its Node: %v, want Forbidden saying %q", c.what, err, c.want)
		}
	}
	if err := patch(daemonClient(t, ""), "vap-self", own); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "names no node") {
		t.Errorf("a daemon token without a node: %v, want Forbidden", err)
	}
	n := &corev1.Node{}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "vap-self"}, n); err != nil {
		t.Fatal(err)
	}
	if n.Labels["rack"] != "r1" || n.Annotations["owner"] != "ops" || n.Spec.Unschedulable {
		t.Errorf("refused patches changed the node: labels %v annotations %v", n.Labels, n.Annotations)
	}
}

// daemonClient talks to the API server as the chart's daemon service
// account whose token names node ("" for none).
func daemonClient(t *testing.T, node string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:estuary-daemon", namespace),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
