package chart

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

func ensureNamespace(t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := k8s.Create(ctx(t), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
}

// TestRenderedObjectsAccepted submits every rendered object, and every
// object of the bootstrap ConfigMap, to the API server (dry run, strict
// field validation): the workloads and webhook configurations against the
// built-in schemas and admission, the default Network and Subnets against
// the CRDs' schema and CEL rules.
func TestRenderedObjectsAccepted(t *testing.T) {
	ensureNamespace(t)
	for name, objs := range renders(t) {
		kinds := map[string]int{}
		for _, o := range append(slices.Clone(objs), bootstrapped(t, objs)...) {
			kinds[o.GetKind()]++
			if err := k8s.Create(ctx(t), o.DeepCopy(), client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s refused: %v", name, o.GetKind(), o.GetName(), err)
			}
		}
		// Services: the webhook's and the two components' metrics;
		// ConfigMaps: the bootstrap objects and the metrics CA; Secrets:
		// the webhook's and the metrics certificates (empty).
		wantSubnets, wantHooks := 1, 1
		if name == "dual-stack" {
			wantSubnets = 2
		}
		if kinds["Network"] != 1 || kinds["Subnet"] != wantSubnets || kinds["DaemonSet"] != 1 || kinds["Deployment"] != 1 ||
			kinds["ConfigMap"] != 2 || kinds["ValidatingWebhookConfiguration"] != wantHooks ||
			kinds["MutatingWebhookConfiguration"] != wantHooks || kinds["Service"] != wantHooks+2 || kinds["Secret"] != wantHooks+1 {
			t.Errorf("%s: rendered kinds %v", name, kinds)
		}
	}
}

type access struct {
	verb, group, resource, subresource, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	if a.namespace != "" {
		r += " in " + a.namespace
	}
	return a.verb + " " + r
}

const estuaryGroup = "networking.estuary.io"

// grants lists, per service account, what the component's code calls and what
// it must not be able to do.
var grants = map[string]struct{ allowed, denied []access }{
	"estuary-manager": {
		allowed: []access{
			{"get", "", "pods", "", "default"}, {"list", "", "pods", "", ""}, {"watch", "", "pods", "", ""},
			{"get", "", "namespaces", "", ""}, {"list", "", "namespaces", "", ""}, {"watch", "", "namespaces", "", ""},
			{"get", "", "nodes", "", ""}, {"list", "", "nodes", "", ""}, {"watch", "", "nodes", "", ""}, {"patch", "", "nodes", "", ""},
			{"get", "apps", "statefulsets", "", "default"}, {"list", "apps", "statefulsets", "", ""}, {"watch", "apps", "statefulsets", "", ""},
			{"get", "apps", "replicasets", "", "default"}, {"list", "apps", "replicasets", "", ""}, {"watch", "apps", "replicasets", "", ""},
			{"get", "batch", "jobs", "", "default"}, {"list", "batch", "jobs", "", ""}, {"watch", "batch", "jobs", "", ""},
			{"get", "apps", "deployments", "", "default"}, {"list", "apps", "deployments", "", ""}, {"watch", "apps", "deployments", "", ""},
			{"get", "apps", "daemonsets", "", "default"}, {"list", "apps", "daemonsets", "", ""}, {"watch", "apps", "daemonsets", "", ""},
			{"get", "batch", "cronjobs", "", "default"}, {"list", "batch", "cronjobs", "", ""}, {"watch", "batch", "cronjobs", "", ""},
			{"get", "", "replicationcontrollers", "", "default"}, {"list", "", "replicationcontrollers", "", ""},
			{"watch", "", "replicationcontrollers", "", ""},
			{"get", "kubevirt.io", "virtualmachines", "", "default"}, {"watch", "kubevirt.io", "virtualmachineinstances", "", ""},
			{"list", "apps.kruise.io", "statefulsets", "", ""}, {"get", "apps.kruise.io", "statefulsets", "", "default"},
			{"list", estuaryGroup, "networks", "", ""}, {"watch", estuaryGroup, "subnets", "", ""},
			{"get", estuaryGroup, "subnets", "", ""}, {"get", estuaryGroup, "networks", "", ""},
			{"patch", estuaryGroup, "networks", "status", ""}, {"patch", estuaryGroup, "subnets", "status", ""},
			{"update", estuaryGroup, "subnets", "status", ""},
			{"create", estuaryGroup, "ipinstances", "", ""}, {"update", estuaryGroup, "ipinstances", "", ""},
			{"delete", estuaryGroup, "ipinstances", "", ""}, {"list", estuaryGroup, "ipinstances", "", ""},
			{"watch", estuaryGroup, "ipinstances", "", ""},
			{"create", "", "events", "", "default"}, {"create", "events.k8s.io", "events", "", "default"},
			{"get", "coordination.k8s.io", "leases", "", namespace}, {"create", "coordination.k8s.io", "leases", "", namespace},
			{"update", "coordination.k8s.io", "leases", "", namespace},
			// Policy status (internal/controller/policystatus).
			{"list", "networking.k8s.io", "networkpolicies", "", ""}, {"watch", "networking.k8s.io", "networkpolicies", "", ""},
			{"watch", "policy.networking.k8s.io", "clusternetworkpolicies", "", ""},
			{"list", "policy.networking.k8s.io", "adminnetworkpolicies", "", ""},
			{"watch", "policy.networking.k8s.io", "baselineadminnetworkpolicies", "", ""},
			{"patch", "policy.networking.k8s.io", "clusternetworkpolicies", "status", ""},
			{"patch", "policy.networking.k8s.io", "adminnetworkpolicies", "status", ""},
			{"patch", "policy.networking.k8s.io", "baselineadminnetworkpolicies", "status", ""},
		},
		denied: []access{
			{"update", "networking.k8s.io", "networkpolicies", "", "default"}, {"patch", "networking.k8s.io", "networkpolicies", "", "default"},
			{"patch", "policy.networking.k8s.io", "clusternetworkpolicies", "", ""},
			{"update", "policy.networking.k8s.io", "adminnetworkpolicies", "", ""},
			{"delete", "policy.networking.k8s.io", "baselineadminnetworkpolicies", "", ""},
			{"update", "policy.networking.k8s.io", "clusternetworkpolicies", "status", ""},
			{"get", "", "secrets", "", namespace}, {"delete", "", "pods", "", "default"}, {"create", "", "pods", "", "default"},
			{"patch", "", "pods", "", "default"}, {"update", "", "pods", "", "default"},
			{"patch", estuaryGroup, "ipinstances", "status", ""}, {"update", estuaryGroup, "ipinstances", "status", ""},
			{"update", "", "nodes", "", ""}, {"delete", "", "nodes", "", ""}, {"create", "", "nodes", "", ""},
			{"patch", "", "nodes", "status", ""}, {"patch", "", "namespaces", "", ""}, {"update", "", "namespaces", "", ""},
			{"update", estuaryGroup, "networks", "", ""}, {"delete", estuaryGroup, "subnets", "", ""},
			{"update", "coordination.k8s.io", "leases", "", "default"}, {"update", "apps", "statefulsets", "", "default"},
			{"update", "apps", "replicasets", "", "default"}, {"delete", "batch", "jobs", "", "default"},
			{"update", "apps", "deployments", "", "default"}, {"patch", "apps", "daemonsets", "", "default"},
			{"create", "batch", "cronjobs", "", "default"}, {"update", "", "replicationcontrollers", "", "default"},
			{"delete", "kubevirt.io", "virtualmachines", "", "default"}, {"update", "apps.kruise.io", "statefulsets", "", "default"},
		},
	},
	"estuary-daemon": {
		allowed: []access{
			{"get", "", "nodes", "", ""}, {"list", "", "nodes", "", ""}, {"watch", "", "nodes", "", ""}, {"patch", "", "nodes", "", ""},
			{"list", estuaryGroup, "ipinstances", "", ""}, {"watch", estuaryGroup, "ipinstances", "", ""},
			{"list", estuaryGroup, "networks", "", ""}, {"watch", estuaryGroup, "subnets", "", ""},
			{"list", "events.k8s.io", "events", "", "default"},
			// Its Node's Events, which go to namespace default.
			{"create", "events.k8s.io", "events", "", "default"},
			// What policy selects (networkPolicy.enabled, the default).
			{"list", "", "pods", "", ""}, {"watch", "", "pods", "", ""},
			{"list", "", "namespaces", "", ""}, {"watch", "", "namespaces", "", ""},
			{"list", "networking.k8s.io", "networkpolicies", "", ""}, {"watch", "networking.k8s.io", "networkpolicies", "", ""},
			{"list", "policy.networking.k8s.io", "clusternetworkpolicies", "", ""},
			{"watch", "policy.networking.k8s.io", "clusternetworkpolicies", "", ""},
			{"list", "policy.networking.k8s.io", "adminnetworkpolicies", "", ""},
			{"watch", "policy.networking.k8s.io", "adminnetworkpolicies", "", ""},
			{"list", "policy.networking.k8s.io", "baselineadminnetworkpolicies", "", ""},
			{"watch", "policy.networking.k8s.io", "baselineadminnetworkpolicies", "", ""},
		},
		denied: []access{
			{"get", "", "pods", "", "default"}, {"get", "", "pods", "", namespace}, {"get", "", "pods", "", ""},
			{"get", "", "pods", "status", "default"}, {"update", "", "namespaces", "", ""},
			{"create", "networking.k8s.io", "networkpolicies", "", "default"},
			{"update", "policy.networking.k8s.io", "clusternetworkpolicies", "", ""},
			{"update", "policy.networking.k8s.io", "clusternetworkpolicies", "status", ""},
			{"patch", "policy.networking.k8s.io", "adminnetworkpolicies", "status", ""},
			{"get", "", "pods", "log", "default"}, {"create", "", "pods", "exec", namespace},
			{"create", "", "events", "", "default"}, {"create", "events.k8s.io", "events", "", namespace},
			{"patch", "events.k8s.io", "events", "", "default"}, {"update", "events.k8s.io", "events", "", "default"},
			{"delete", "events.k8s.io", "events", "", "default"},
			{"get", "", "secrets", "", namespace}, {"get", "", "secrets", "", bgpSecrets},
			{"list", "", "secrets", "", ""}, {"create", estuaryGroup, "ipinstances", "", ""},
			{"update", estuaryGroup, "ipinstances", "", ""}, {"patch", "", "pods", "", "default"},
			{"delete", "", "nodes", "", ""}, {"update", "", "nodes", "", ""}, {"patch", estuaryGroup, "subnets", "status", ""},
			{"create", "coordination.k8s.io", "leases", "", namespace},
		},
	},
}

// bgpSecrets is the namespace TestBGPPasswordGrant lets the daemon read
// BGP passwords from.
const bgpSecrets = "bgp-secrets"

// TestRBACGrants installs the chart's RBAC and asks the API server's authorizer
// what each service account may do.
func TestRBACGrants(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	for sa, g := range grants {
		user := fmt.Sprintf("system:serviceaccount:%s:%s", namespace, sa)
		for _, a := range g.allowed {
			if !allowed(t, user, a) {
				t.Errorf("%s may not %s; the chart must grant it", sa, a)
			}
		}
		for _, a := range g.denied {
			if allowed(t, user, a) {
				t.Errorf("%s may %s; the chart must not grant it", sa, a)
			}
		}
	}
}

// TestBGPPasswordGrant: with underlay.bgpPasswordSecrets the daemon may get
// exactly those Secrets, by name, and no other, and never list or watch.
func TestBGPPasswordGrant(t *testing.T) {
	ensureNamespace(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bgpSecrets}}
	if err := k8s.Create(ctx(t), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", bgpSecrets, err)
	}
	installRBAC(t, render(t, "--set", "underlay.bgpPasswordSecrets[0].namespace="+bgpSecrets, "--set", "underlay.bgpPasswordSecrets[0].name=fabric"))
	user := fmt.Sprintf("system:serviceaccount:%s:estuary-daemon", namespace)
	if a := (named{access{"get", "", "secrets", "", bgpSecrets}, "fabric"}); !allowedName(t, user, a) {
		t.Errorf("estuary-daemon may not %s; the chart must grant it", a)
	}
	for _, a := range []named{
		{access{"get", "", "secrets", "", bgpSecrets}, "other"}, {access{"get", "", "secrets", "", bgpSecrets}, ""},
		{access{"list", "", "secrets", "", bgpSecrets}, ""}, {access{"watch", "", "secrets", "", bgpSecrets}, ""},
		{access{"get", "", "secrets", "", namespace}, "fabric"}, {access{"list", "", "secrets", "", ""}, ""},
	} {
		if allowedName(t, user, a) {
			t.Errorf("estuary-daemon may %s; the chart must not grant it", a)
		}
	}
	if _, err := renderErr(t, "--set", "underlay.bgpPasswordSecrets[0].namespace="+bgpSecrets); err == nil {
		t.Error("a Secret without a name rendered")
	}
}

// installRBAC creates the rendered service accounts, roles and bindings
// until the test ends.
func installRBAC(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		obj := o.DeepCopy()
		if err := k8s.Create(ctx(t), obj); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx(t), obj) })
	}
	waitRBACSeen(t, objs)
}

// waitRBACSeen waits until the API server's authorizer, which reads RBAC
// objects through its own informers, allows each binding's service
// accounts the first rule of the bound role: until then an access review
// may deny what the chart grants.
func waitRBACSeen(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding has the same shape
		convert(t, o, &b)
		var role rbacv1.ClusterRole // a Role's rules have the same shape
		convert(t, find(t, objs, b.RoleRef.Kind, b.RoleRef.Name), &role)
		if len(role.Rules) == 0 || len(role.Rules[0].Resources) == 0 {
			continue // nothing, or non-resource URLs: the test that binds them waits for them
		}
		r := role.Rules[0]
		a := named{access: access{verb: r.Verbs[0], resource: r.Resources[0], namespace: b.Namespace}}
		if len(r.APIGroups) > 0 {
			a.group = r.APIGroups[0]
		}
		if len(r.ResourceNames) > 0 {
			a.name = r.ResourceNames[0]
		}
		for _, sub := range b.Subjects {
			user := fmt.Sprintf("system:serviceaccount:%s:%s", sub.Namespace, sub.Name)
			testenv.Eventually(t, fmt.Sprintf("%s %s seen by the authorizer (%s may %s)", o.GetKind(), o.GetName(), user, a), 30*time.Second,
				func() error {
					if !allowedName(t, user, a) {
						return errors.New("not allowed yet")
					}
					return nil
				})
		}
	}
}

func allowed(t *testing.T, user string, a access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
		},
	}}
	if err := k8s.Create(ctx(t), sar); err != nil {
		t.Fatalf("access review %s for %s: %v", a, user, err)
	}
	return sar.Status.Allowed
}

// TestInvalidNetworkRefused shows the dry runs above are checked against the
// CRDs: a VXLAN network without a VNI is refused (values.schema.json refuses
// netID 0 first: the render skips it).
func TestInvalidNetworkRefused(t *testing.T) {
	n := find(t, bootstrapped(t, render(t, "--skip-schema-validation", "--set", "defaultNetwork.netID=0")), "Network", "overlay")
	err := k8s.Create(ctx(t), n, client.DryRunAll)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("Network with netID 0: %v; want Invalid", err)
	}
}
