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

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestDaemonMayPatchOnlyItsOwnNode installs the chart's RBAC and its
// admission policy and patches Nodes as the daemon of node vap-self would
// (its bound token names the node): the annotations it writes
// (networking.estuary.io/vtep-ip, vtep-mac, bgp-peers, daemon-status) go
// through; another Node, its labels, finalizers, owner references,
// generateName, spec, any other annotation (networking.estuary.io/ ones
// included), or a token that names no node are refused with the policy's
// message.
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
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "inventory", UID: "6c1e0d3e-0000-4000-8000-000000000001"}
	for _, name := range []string{"vap-self", "vap-other"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": "r1"},
			Annotations: map[string]string{"owner": "ops", "networking.estuary.io/network-fabric": "ops"},
			Finalizers:  []string{"ops.example.com/decommission"}, OwnerReferences: []metav1.OwnerReference{owner}}}
		if err := k8s.Create(ctx(t), n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = k8s.Patch(ctx(t), n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			_ = k8s.Delete(ctx(t), n)
		})
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
	for _, body := range []string{own,
		`{"metadata":{"annotations":{"networking.estuary.io/vtep-mac":"0a:58:0a:00:00:01","networking.estuary.io/bgp-peers":"{}"}}}`,
		`{"metadata":{"annotations":{"networking.estuary.io/bgp-peers":null}}}`,
		`{"metadata":{"annotations":{"networking.estuary.io/daemon-status":"{\"version\":\"v1\"}"}}}`,
		`{"metadata":{"annotations":{"networking.estuary.io/uninstalled":"{\"request\":\"r1\"}","networking.estuary.io/vtep-ip":null,"networking.estuary.io/daemon-status":null}}}`,
	} {
		if err := patch(daemon, "vap-self", body); err != nil {
			t.Errorf("the daemon may not write its own annotations (%s): %v", body, err)
		}
	}
	const annotations = "may change only its annotations networking.estuary.io/vtep-ip, vtep-mac, bgp-peers, daemon-status and uninstalled"
	const refs = "finalizers, ownerReferences or generateName"
	for _, c := range []struct{ what, body, want string }{
		{"a label", `{"metadata":{"labels":{"rack":"r2"}}}`, "labels or spec"},
		{"another annotation", `{"metadata":{"annotations":{"owner":"me"}}}`, annotations},
		{"removing another annotation", `{"metadata":{"annotations":{"owner":null}}}`, annotations},
		{"another estuary annotation", `{"metadata":{"annotations":{"networking.estuary.io/network-fabric":"daemon"}}}`, annotations},
		{"a new estuary annotation", `{"metadata":{"annotations":{"networking.estuary.io/ipv4-available-fabric":"true"}}}`, annotations},
		{"removing another estuary annotation", `{"metadata":{"annotations":{"networking.estuary.io/network-fabric":null}}}`, annotations},
		{"its spec", `{"spec":{"unschedulable":true}}`, "labels or spec"},
		{"adding a finalizer", `{"metadata":{"finalizers":["ops.example.com/decommission","estuary.example/hold"]}}`, refs},
		{"removing the finalizers", `{"metadata":{"finalizers":null}}`, refs},
		{"adding an owner", `{"metadata":{"ownerReferences":[` + ownerJSON(owner) + `,{"apiVersion":"v1","kind":"Namespace","name":"kube-system","uid":"6c1e0d3e-0000-4000-8000-000000000002"}]}}`, refs},
		{"removing the owners", `{"metadata":{"ownerReferences":null}}`, refs},
		{"its generateName", `{"metadata":{"generateName":"vap-"}}`, refs},
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
	if n.Labels["rack"] != "r1" || n.Annotations["owner"] != "ops" || n.Annotations["networking.estuary.io/network-fabric"] != "ops" ||
		n.Spec.Unschedulable || len(n.Finalizers) != 1 || len(n.OwnerReferences) != 1 || n.GenerateName != "" {
		t.Errorf("refused patches changed the node: labels %v annotations %v finalizers %v owners %v generateName %q",
			n.Labels, n.Annotations, n.Finalizers, n.OwnerReferences, n.GenerateName)
	}
}

// ownerJSON is an owner reference as a merge patch writes it.
func ownerJSON(o metav1.OwnerReference) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q}`, o.APIVersion, o.Kind, o.Name, o.UID)
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
