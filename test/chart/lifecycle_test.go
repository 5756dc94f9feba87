package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// daemonRESTConfig is restConfig impersonating the chart's daemon service
// account.
func daemonRESTConfig() *rest.Config {
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:estuary-daemon", namespace),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// watchAsDaemon starts the daemon's removal watch of the DaemonSet
// estuary-daemon as the daemon's service account, until the test ends.
func watchAsDaemon(t *testing.T) *daemon.Removal {
	t.Helper()
	c, cancel := context.WithCancel(ctx(t))
	t.Cleanup(cancel)
	r, err := daemon.WatchRemoval(c, daemonRESTConfig(), namespace+"/estuary-daemon")
	if err != nil {
		t.Fatalf("watch as the daemon: %v", err)
	}
	return r
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

// TestDaemonSeesItsDaemonSetDeleted runs the daemon's removal watch as the
// daemon's service account with nothing but the chart's RBAC: while its
// DaemonSet exists a stop is a restart; once the DaemonSet is deleted the
// watch reports a removal.
func TestDaemonSeesItsDaemonSetDeleted(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	ds := ownDaemonSet(t)
	r := watchAsDaemon(t)
	if removed, err := r.Removed(ctx(t)); err != nil || removed {
		t.Fatalf("Removed with the DaemonSet in place = %v, %v; want false, nil", removed, err)
	}
	if err := k8s.Delete(ctx(t), ds); err != nil {
		t.Fatalf("delete DaemonSet: %v", err)
	}
	waitRemoved(t, r, "the removal watch never saw the DaemonSet deleted")
}

// waitRemoved waits up to 30 s for r to report the removal.
func waitRemoved(t *testing.T, r *daemon.Removal, failure string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if removed, _ := r.Removed(ctx(t)); removed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(failure)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRemovalWatchSeesDeleteWithoutRBAC: the uninstall deletes the daemon's
// RBAC in the same pass as its DaemonSet; a watch started while the RBAC
// existed still reports the removal, without a last read.
func TestRemovalWatchSeesDeleteWithoutRBAC(t *testing.T) {
	ensureNamespace(t)
	objs := render(t)
	installRBAC(t, objs)
	ds := ownDaemonSet(t)
	r := watchAsDaemon(t)
	for _, o := range objs {
		if o.GetKind() == "RoleBinding" && strings.HasPrefix(o.GetName(), "estuary-daemon-own-daemonset") {
			if err := k8s.Delete(ctx(t), o.DeepCopy()); err != nil {
				t.Fatalf("delete %s: %v", o.GetName(), err)
			}
			t.Cleanup(func() {
				if err := k8s.Create(context.Background(), o.DeepCopy()); err != nil {
					t.Errorf("re-create %s: %v", o.GetName(), err)
				}
			})
		}
	}
	if err := k8s.Delete(ctx(t), ds); err != nil {
		t.Fatalf("delete DaemonSet: %v", err)
	}
	waitRemoved(t, r, "the removal watch never saw the DaemonSet deleted once the RBAC was gone")
}

// TestRemovalNeedsTheDaemonSet: a daemon pointed at a DaemonSet that does
// not exist refuses to start rather than uninstall at every stop.
func TestRemovalNeedsTheDaemonSet(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	_, err := daemon.WatchRemoval(ctx(t), daemonRESTConfig(), namespace+"/estuary-daemon-missing")
	if err == nil || !strings.Contains(err.Error(), "--daemonset") {
		t.Fatalf("WatchRemoval of a missing DaemonSet = %v; want an error naming --daemonset", err)
	}
	if _, err := daemon.WatchRemoval(ctx(t), daemonRESTConfig(), "no-slash"); err == nil {
		t.Fatal("WatchRemoval accepted a reference without a namespace")
	}
}

// TestCleanUpNodesOnUninstallValue: on by default, the daemon is given its
// DaemonSet and may read it; off, neither.
func TestCleanUpNodesOnUninstallValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		on   bool
	}{{nil, true}, {[]string{"--set", "daemon.cleanUpNodesOnUninstall=false"}, false}} {
		objs := render(t, c.args...)
		arg := "--daemonset=" + namespace + "/estuary-daemon"
		var ds appsv1.DaemonSet
		convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
		args := ds.Spec.Template.Spec.Containers[0].Args
		if got := strings.Contains(strings.Join(args, " "), arg); got != c.on {
			t.Errorf("%v: daemon args carry %s = %v, want %v", c.args, arg, got, c.on)
		}
		role := false
		for _, o := range objs {
			role = role || (o.GetKind() == "Role" && o.GetName() == "estuary-daemon-own-daemonset")
		}
		if role != c.on {
			t.Errorf("%v: Role estuary-daemon-own-daemonset rendered = %v, want %v", c.args, role, c.on)
		}
	}
}

// TestManagerMayUpgradeOnlyItsCRDs: the manager may read and update its
// three CRDs and the ClusterNetworkPolicy CRD the chart installs, by name,
// and no other CRD; it may never create or delete one.
func TestManagerMayUpgradeOnlyItsCRDs(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	user := fmt.Sprintf("system:serviceaccount:%s:estuary-manager", namespace)
	crd := func(verb, name string) named {
		return named{access{verb, "apiextensions.k8s.io", "customresourcedefinitions", "", ""}, name}
	}
	for _, n := range []string{"networks.networking.estuary.io", "subnets.networking.estuary.io", "ipinstances.networking.estuary.io",
		"clusternetworkpolicies.policy.networking.k8s.io"} {
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

// TestRecreatedDaemonSetIsNoRemoval: a DaemonSet deleted and created again
// (which adopts the running pods) is not an uninstall, although the watch
// saw the deletion.
func TestRecreatedDaemonSetIsNoRemoval(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	ds := ownDaemonSet(t)
	r := watchAsDaemon(t)
	if err := k8s.Delete(ctx(t), ds); err != nil {
		t.Fatal(err)
	}
	waitRemoved(t, r, "the removal watch never saw the DaemonSet deleted")
	ownDaemonSet(t)
	if removed, err := r.Removed(ctx(t)); err != nil || removed {
		t.Fatalf("Removed with the DaemonSet re-created = %v, %v; want false, nil", removed, err)
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
