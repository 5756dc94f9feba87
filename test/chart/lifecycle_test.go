package chart

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/uninstall"
)

// impersonating is restConfig as the chart's service account sa, on node
// (the node its token would name) when not empty.
func impersonating(sa, node string) *rest.Config {
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, sa),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	return cfg
}

// watchAsDaemon starts the daemon's watch of the DaemonSet estuary-daemon
// for an uninstall request, as the daemon's service account, until the
// test ends.
func watchAsDaemon(t *testing.T, node string) *daemon.UninstallWatch {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	t.Cleanup(cancel)
	w, err := daemon.WatchUninstall(c, impersonating("estuary-daemon", node), namespace+"/estuary-daemon")
	if err != nil {
		t.Fatalf("watch as the daemon: %v", err)
	}
	return w
}

// ownDaemonSet creates a DaemonSet named estuary-daemon in the release
// namespace (the API server runs no controllers: it stays an object).
func ownDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	labels := map[string]string{"app": "estuary-removal-test"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "estuary-daemon", Namespace: namespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "daemon", Image: "estuary.local/estuary-daemon:test"}}},
			},
		},
	}
	if err := k8s.Create(ctx(t), ds); err != nil {
		t.Fatalf("create DaemonSet: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ds) })
	return ds
}

// daemonPodOn creates a pod of the DaemonSet ds scheduled to a new Node
// named node (the API server runs no controllers: both stay objects).
func daemonPodOn(t *testing.T, ds *appsv1.DaemonSet, node string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k8s.Create(ctx(t), n); err != nil {
		t.Fatalf("create Node %s: %v", node, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "estuary-daemon-" + node, Namespace: namespace, Labels: ds.Spec.Template.Labels},
		Spec:       ds.Spec.Template.Spec,
	}
	pod.Spec.NodeName = node
	if err := k8s.Create(ctx(t), pod); err != nil {
		t.Fatalf("create daemon pod on %s: %v", node, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
}

// answerWhenAsked plays a node's daemon: once w carries a request it
// answers it on the Node with the daemon's own rights, as
// RunUnlessUninstalled does after removing estuary.
func answerWhenAsked(t *testing.T, w *daemon.UninstallWatch, node string) {
	go func() {
		for {
			request, changed := w.Request()
			if request != "" {
				if err := w.Answer(ctx(t), node, estuaryv1.NodeUninstallStatus{Request: request, Done: "test"}); err != nil {
					t.Errorf("answer on %s: %v", node, err)
				}
				return
			}
			select {
			case <-ctx(t).Done():
				return
			case <-changed:
			}
		}
	}()
}

// TestUninstallIsAskedAndAnswered: `estuary-manager uninstall-nodes` (the
// pre-delete hook), with the hook's RBAC only, asks on the DaemonSet; each
// daemon, with the daemon's RBAC only, sees the request and answers on its
// Node; the requester returns once both nodes answered and clears the
// answers, and the daemons' own annotations are gone from the Nodes.
// Withdrawing the request is seen by the daemons.
func TestUninstallIsAskedAndAnswered(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	ds := ownDaemonSet(t)
	for _, node := range []string{"uninstall-n1", "uninstall-n2"} {
		daemonPodOn(t, ds, node)
		answerWhenAsked(t, watchAsDaemon(t, node), node)
	}
	hook, err := client.New(impersonating("estuary-uninstall", ""), client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 30*time.Second)
	defer cancel()
	var out, errOut strings.Builder
	if code := uninstall.Run(c, hook, uninstall.Options{Namespace: namespace, DaemonSet: "estuary-daemon", Poll: 100 * time.Millisecond}, &out, &errOut); code != 0 {
		t.Fatalf("uninstall as the hook = %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, node := range []string{"uninstall-n1", "uninstall-n2"} {
		if !strings.Contains(out.String(), node+"\tclean") {
			t.Errorf("the requester's report does not name %s clean:\n%s", node, out.String())
		}
		var n corev1.Node
		if err := k8s.Get(ctx(t), client.ObjectKey{Name: node}, &n); err != nil {
			t.Fatal(err)
		}
		if v, ok := n.Annotations[estuaryv1.AnnotationUninstalled]; ok {
			t.Errorf("Node %s keeps the answer %s after the requester cleared it", node, v)
		}
	}
	w := watchAsDaemon(t, "uninstall-n1")
	request, changed := w.Request()
	if request == "" {
		t.Fatal("a daemon starting under the request does not see it")
	}
	if err := uninstall.Withdraw(ctx(t), hook, uninstall.Options{Namespace: namespace, DaemonSet: "estuary-daemon"}); err != nil {
		t.Fatalf("withdraw as the hook: %v", err)
	}
	select {
	case <-changed:
	case <-c.Done():
		t.Fatal("the daemon never saw the request withdrawn")
	}
	if r, _ := w.Request(); r != "" {
		t.Fatalf("after the withdrawal the daemon sees request %q", r)
	}
}

// TestUninstallNamesTheNodesThatDoNotAnswer: a node whose daemon never
// answers is named when the wait ends, and the requester fails.
func TestUninstallNamesTheNodesThatDoNotAnswer(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	ds := ownDaemonSet(t)
	daemonPodOn(t, ds, "silent-n1")
	hook, err := client.New(impersonating("estuary-uninstall", ""), client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	report, err := uninstall.Request(c, hook, uninstall.Options{Namespace: namespace, DaemonSet: "estuary-daemon", Poll: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "silent-n1") || len(report.Pending()) != 1 {
		t.Fatalf("uninstall with a silent node = %+v, %v; want an error naming silent-n1", report, err)
	}
}

// TestDeletedDaemonSetIsNoUninstall: deleting the DaemonSet, or deleting
// and re-creating it (which adopts the running pods), is never read as an
// uninstall request: a watch running through both sees no request until
// one is annotated, and one started while the DaemonSet is gone sees none.
func TestDeletedDaemonSetIsNoUninstall(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	ds := ownDaemonSet(t)
	w := watchAsDaemon(t, "")
	if err := k8s.Delete(ctx(t), ds); err != nil {
		t.Fatal(err)
	}
	if r, _ := watchAsDaemon(t, "").Request(); r != "" {
		t.Fatalf("a watch started with the DaemonSet gone sees request %q", r)
	}
	again := ownDaemonSet(t)
	// Events reach the watch in order: once it sees the request annotated
	// on the re-created DaemonSet it has seen the deletion and the
	// re-creation, and every value it held on the way is recorded.
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, changed := w.Request()
			if r != "" {
				seen = append(seen, r)
			}
			if r == "asked" {
				return
			}
			select {
			case <-changed:
			case <-ctx(t).Done():
				return
			}
		}
	}()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+estuaryv1.AnnotationUninstallRequest+`":"asked"}}}`))
	if err := k8s.Patch(ctx(t), again, patch); err != nil {
		t.Fatal(err)
	}
	<-done
	if len(seen) != 1 || seen[0] != "asked" {
		t.Fatalf("requests seen through the deletion and re-creation: %q; want only the one annotated", seen)
	}
}

// TestCleanUpNodesOnUninstallValue: every daemon watches its DaemonSet
// for a request and may read it; the pre-delete hook that asks is
// rendered by default, with least-privilege RBAC, and not when the value
// is off.
func TestCleanUpNodesOnUninstallValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		on   bool
	}{{nil, true}, {[]string{"--set", "daemon.cleanUpNodesOnUninstall=false"}, false}} {
		objs := render(t, c.args...)
		arg := "--daemonset=" + namespace + "/estuary-daemon"
		var ds appsv1.DaemonSet
		convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
		if args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, arg) {
			t.Errorf("%v: daemon args %s; want %s", c.args, args, arg)
		}
		find(t, objs, "Role", "estuary-daemon-own-daemonset")
		hook := false
		for _, o := range objs {
			if o.GetKind() == "Job" && o.GetName() == "estuary-uninstall" {
				hook = true
				if o.GetAnnotations()["helm.sh/hook"] != "pre-delete" {
					t.Errorf("Job estuary-uninstall annotations %v; want a pre-delete hook", o.GetAnnotations())
				}
			}
		}
		if hook != c.on {
			t.Errorf("%v: the uninstall hook rendered = %v, want %v", c.args, hook, c.on)
		}
	}
	ensureNamespace(t)
	installRBAC(t, render(t))
	user := fmt.Sprintf("system:serviceaccount:%s:estuary-uninstall", namespace)
	ds := func(verb, name string) named {
		return named{access{verb, "apps", "daemonsets", "", namespace}, name}
	}
	for _, a := range []named{ds("patch", "estuary-daemon"), {access{"patch", "", "nodes", "", ""}, "n1"}, {access{"list", "", "pods", "", namespace}, ""}} {
		if !allowedName(t, user, a) {
			t.Errorf("the uninstall hook may not %s; it must", a)
		}
	}
	for _, a := range []named{ds("patch", "other"), ds("delete", "estuary-daemon"), {access{"delete", "", "nodes", "", ""}, "n1"}, {access{"list", "", "secrets", "", namespace}, ""}} {
		if allowedName(t, user, a) {
			t.Errorf("the uninstall hook may %s; it must not", a)
		}
	}
}

// TestManagerMayUpgradeOnlyItsCRDs: the manager may read and update its
// four CRDs and the ClusterNetworkPolicy CRD the chart installs, by name,
// and no other CRD; it may never create or delete one.
func TestManagerMayUpgradeOnlyItsCRDs(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	user := fmt.Sprintf("system:serviceaccount:%s:estuary-manager", namespace)
	crd := func(verb, name string) named {
		return named{access{verb, "apiextensions.k8s.io", "customresourcedefinitions", "", ""}, name}
	}
	for _, n := range []string{"networks.networking.estuary.io", "subnets.networking.estuary.io", "ipinstances.networking.estuary.io",
		"iphistories.networking.estuary.io", "clusternetworkpolicies.policy.networking.k8s.io"} {
		for _, verb := range []string{"get", "update"} {
			if !allowedName(t, user, crd(verb, n)) {
				t.Errorf("the manager may not %s CRD %s; the chart must grant it", verb, n)
			}
		}
		if allowedName(t, user, crd("delete", n)) {
			t.Errorf("the manager may delete CRD %s", n)
		}
	}
	for _, a := range []named{crd("update", "widgets.example.com"), crd("update", "adminnetworkpolicies.policy.networking.k8s.io"), crd("create", ""), crd("list", ""), crd("get", "widgets.example.com")} {
		if allowedName(t, user, a) {
			t.Errorf("the manager may %s %q; the chart must not grant it", a.access, a.name)
		}
	}
	objs := render(t, "--set", "manager.upgradeCRDs=false")
	var dep appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &dep)
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--upgrade-crds=false") {
		t.Errorf("manager.upgradeCRDs=false renders args %s; want --upgrade-crds=false", args)
	}
}

// TestUpdateStrategies: the manager, which holds its ports in the node's
// network, rolls without a surge (a surge pod could not start beside the
// old one, and a single-node cluster would wait forever); the daemon's
// strategy is a value.
func TestUpdateStrategies(t *testing.T) {
	var dep appsv1.Deployment
	convert(t, find(t, render(t), "Deployment", "estuary-manager"), &dep)
	ru := dep.Spec.Strategy.RollingUpdate
	if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxSurge == nil || ru.MaxSurge.IntValue() != 0 || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 1 {
		t.Errorf("manager strategy %+v; want RollingUpdate with maxSurge 0, maxUnavailable 1", dep.Spec.Strategy)
	}
	var ds appsv1.DaemonSet
	convert(t, find(t, render(t, "--set", "daemon.updateStrategy.type=OnDelete", "--set", "daemon.updateStrategy.rollingUpdate=null"),
		"DaemonSet", "estuary-daemon"), &ds)
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		t.Errorf("daemon.updateStrategy.type=OnDelete rendered %+v", ds.Spec.UpdateStrategy)
	}
	if _, err := renderErr(t, "--set", "daemon.updateStrategy.type=Sometimes"); err == nil {
		t.Error("daemon.updateStrategy.type=Sometimes was accepted")
	}
}

// TestKubeVersionFloor: the chart refuses the minors whose API servers
// reject its CRDs (1.30: no CEL IP and CIDR library; 1.31: the Subnet
// rules exceed its CEL cost budget), naming the requirement, and renders
// for 1.32 on.
func TestKubeVersionFloor(t *testing.T) {
	render(t, "--kube-version", "v1.32.0")
	_, err := renderErr(t, "--kube-version", "v1.31.4")
	if err == nil || !strings.Contains(err.Error(), "chart requires kubeVersion: >=1.32.0-0") {
		t.Fatalf("render for Kubernetes v1.31.4 = %v; want the chart's kubeVersion requirement", err)
	}
}

// checkUnprivilegedDaemon: by default the daemon's container is not
// privileged, drops every capability and adds back NET_ADMIN, NET_RAW and
// SYS_ADMIN only, runs the runtime's seccomp profile on a read-only root,
// and reaches the host's /proc/sys through a writable mount it is told of.
func checkUnprivilegedDaemon(t *testing.T, what string, ds *appsv1.DaemonSet) {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW", "SYS_ADMIN"}) ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: securityContext %+v; want unprivileged with NET_ADMIN, NET_RAW, SYS_ADMIN", what, sc)
	}
	if !slices.Contains(c.Args, "--proc-sys-dir=/host/proc/sys") {
		t.Errorf("%s: args %v lack --proc-sys-dir=/host/proc/sys", what, c.Args)
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "proc-sys" && m.MountPath == "/host/proc/sys" && !m.ReadOnly
	})
	host := slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == "proc-sys" && v.HostPath != nil && v.HostPath.Path == "/proc/sys"
	})
	if !mounted || !host {
		t.Errorf("%s: the host's /proc/sys is not mounted writable at /host/proc/sys (mount %v, volume %v)", what, mounted, host)
	}
}

// TestDaemonPrivilegedValue: daemon.privileged=true runs the daemon
// privileged, on /proc/sys itself; a capability list names only
// capabilities.
func TestDaemonPrivilegedValue(t *testing.T) {
	var ds appsv1.DaemonSet
	convert(t, find(t, render(t, "--set", "daemon.privileged=true"), "DaemonSet", "estuary-daemon"), &ds)
	c := ds.Spec.Template.Spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Errorf("daemon.privileged=true: securityContext %+v, want privileged", sc)
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--proc-sys-dir") {
			t.Errorf("daemon.privileged=true: args carry %s", a)
		}
	}
	if _, err := renderErr(t, "--set", "daemon.capabilities={net_admin}"); err == nil {
		t.Error("daemon.capabilities={net_admin} was accepted")
	}
}

// TestManagerIsHighlyAvailable: two replicas by default, one per node
// (required anti-affinity on the hostname), and a PodDisruptionBudget
// letting one go at a time; one replica renders no budget, and an affinity
// value replaces the default one.
func TestManagerIsHighlyAvailable(t *testing.T) {
	objs := render(t)
	var dep appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &dep)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("manager replicas %v, want 2", dep.Spec.Replicas)
	}
	aff := dep.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" ||
		aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels["app.kubernetes.io/name"] != "estuary-manager" {
		t.Errorf("manager affinity %+v; want one replica per node", aff)
	}
	var pdb policyv1.PodDisruptionBudget
	convert(t, find(t, objs, "PodDisruptionBudget", "estuary-manager"), &pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 ||
		pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "estuary-manager" {
		t.Errorf("PodDisruptionBudget %+v; want maxUnavailable 1 of the managers", pdb.Spec)
	}
	for _, o := range render(t, "--set", "manager.replicas=1") {
		if o.GetKind() == "PodDisruptionBudget" {
			t.Error("manager.replicas=1 renders a PodDisruptionBudget, which would block every drain")
		}
	}
	convert(t, find(t, render(t, "--set", "manager.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=role",
		"--set", "manager.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists"), "Deployment", "estuary-manager"), &dep)
	if a := dep.Spec.Template.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.PodAntiAffinity != nil {
		t.Errorf("manager.affinity set: affinity %+v; want the value's, alone", a)
	}
}
