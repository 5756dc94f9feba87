//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// The Kruise-like kind TestControllerKindsKeepAddresses configures with
// manager.workloadKinds: a CRD of the test's own, whose pods a controller
// in the test process makes, named <set>-<ordinal>.
const (
	cloneSetGroup = "e2e.estuary.io"
	cloneSetKinds = `[{"group":"e2e.estuary.io","version":"v1","kind":"CloneSet","ordinal":true}]`
)

// TestControllerKindsKeepAddresses: (a) the VIP PaaS redeploy: a
// ReplicationController of two retaining pods is deleted with its pods and
// created again under the same name, and its new pods run on the old
// addresses; (b) a controller kind estuary does not know, configured with
// `helm upgrade --set-json manager.workloadKinds=...`: a pod its
// controller re-creates under the same ordinal name runs on the pod's old
// address. The lab's values are restored at the end.
func TestControllerKindsKeepAddresses(t *testing.T) {
	e := needLab(t)
	t.Cleanup(func() { e.helmInstallAgain(t) })
	e.createCloneSetCRD(t)
	e.helmInstallAgain(t, "--set-json", "manager.workloadKinds="+cloneSetKinds)
	e.waitManagersReady(t)
	ns := e.newNamespace(t, "controller-kinds")

	before, after := e.redeployRC(t, ns, 2)
	if !slices.Equal(before, after) {
		t.Errorf("re-created ReplicationController runs on %v, want its old addresses %v", after, before)
	}

	set := e.runCloneSet(t, ns, "cs", 2)
	pods := e.waitPods(t, ns, "cs-0", "cs-1")
	old := pods["cs-1"]
	if err := e.c.Delete(testCtx(t, time.Minute), &old); err != nil {
		t.Fatal(err)
	}
	var back corev1.Pod
	eventually(t, "cs-1 re-created by its controller, Running on an address", 2*time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cs-1"}, &back); err != nil {
			return err
		}
		if back.UID == old.UID || back.Status.PodIP == "" || back.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("uid %s phase %s ip %q", back.UID, back.Status.Phase, back.Status.PodIP)
		}
		return nil
	})
	if back.Status.PodIP != old.Status.PodIP {
		t.Errorf("cs-1 re-created runs on %s, want its address %s", back.Status.PodIP, old.Status.PodIP)
	}
	l, err := e.instances(testCtx(t, time.Minute), ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ipi := range l {
		if b := ipi.Spec.Binding; b.PodName == "cs-1" && (b.Owner.Kind != "CloneSet."+cloneSetGroup || b.Owner.Name != set || b.StatefulOrdinal == nil || *b.StatefulOrdinal != 1) {
			t.Errorf("%s: owner %+v ordinal %v; want CloneSet.%s %s, ordinal 1", ipi.Name, b.Owner, b.StatefulOrdinal, cloneSetGroup, set)
		}
	}
	e.checkNoDuplicates(t)
}

// redeployRC creates ReplicationController vip of n retaining netexec pods
// in ns, deletes it and its pods, waits until its n addresses are
// Retained, creates it again and returns its pods' addresses before and
// after, each sorted.
func (e *labEnv) redeployRC(t *testing.T, ns string, n int) (before, after []string) {
	t.Helper()
	labels := map[string]string{"app": "vip"}
	rc := func() *corev1.ReplicationController {
		return &corev1.ReplicationController{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vip"},
			Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To(int32(n)), Selector: labels, Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{estuaryv1.AnnotationIPRetain: "true"}},
				Spec:       podTemplate("", netexecContainer()),
			}},
		}
	}
	if err := e.c.Create(testCtx(t, time.Minute), rc()); err != nil {
		t.Fatal(err)
	}
	before = podIPs(e.waitReady(t, ns, labels, n, 3*time.Minute))
	if err := e.c.Delete(testCtx(t, time.Minute), rc(), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	e.waitNoPods(t, ns, labels, 2*time.Minute)
	e.waitRetained(t, ns, "vip", n)
	eventually(t, "ReplicationController vip gone", time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vip"}, &corev1.ReplicationController{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	if err := e.c.Create(testCtx(t, time.Minute), rc()); err != nil {
		t.Fatal(err)
	}
	return before, podIPs(e.waitReady(t, ns, labels, n, 3*time.Minute))
}

// createCloneSetCRD creates the CRD of CloneSet.e2e.estuary.io, deleted
// (with its objects) when the test ends.
func (e *labEnv) createCloneSetCRD(t *testing.T) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"group": cloneSetGroup,
			"names": map[string]any{"kind": "CloneSet", "listKind": "CloneSetList", "plural": "clonesets", "singular": "cloneset"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName("clonesets." + cloneSetGroup)
	if err := e.c.Create(testCtx(t, time.Minute), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.Delete(testCtx(t, time.Minute), crd) })
	eventually(t, "CloneSet served", time.Minute, func(_ context.Context) error {
		_, err := e.c.RESTMapper().RESTMapping(schema.GroupKind{Group: cloneSetGroup, Kind: "CloneSet"}, "v1")
		return err
	})
}

// runCloneSet creates CloneSet ns/name and runs its controller until the
// test ends: it keeps pods <name>-0 .. <name>-<replicas-1>, controlled by
// the set, creating each one that does not exist.
func (e *labEnv) runCloneSet(t *testing.T, ns, name string, replicas int) string {
	t.Helper()
	set := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(replicas)}}}
	set.SetGroupVersionKind(schema.GroupVersionKind{Group: cloneSetGroup, Version: "v1", Kind: "CloneSet"})
	set.SetNamespace(ns)
	set.SetName(name)
	if err := e.c.Create(testCtx(t, time.Minute), set); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			for i := range replicas {
				e.ensureCloneSetPod(ctx, t, set, i)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return name
}

// ensureCloneSetPod creates pod <set>-<ordinal> when there is none.
func (e *labEnv) ensureCloneSetPod(ctx context.Context, t *testing.T, set *unstructured.Unstructured, ordinal int) {
	name := fmt.Sprintf("%s-%d", set.GetName(), ordinal)
	err := e.c.Get(ctx, client.ObjectKey{Namespace: set.GetNamespace(), Name: name}, &corev1.Pod{})
	if !apierrors.IsNotFound(err) {
		return
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: set.GetNamespace(), Name: name,
			Labels:      map[string]string{"app": set.GetName()},
			Annotations: map[string]string{estuaryv1.AnnotationIPRetain: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: set.GetAPIVersion(), Kind: set.GetKind(),
				Name: set.GetName(), UID: set.GetUID(), Controller: ptr.To(true)}}},
		Spec: podTemplate("", netexecContainer()),
	}
	if err := e.c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
		t.Logf("CloneSet controller: create pod %s: %v", name, err)
	}
}
