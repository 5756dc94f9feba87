package cli

// What migrate hybridnet reads: hybridnet's objects from the cluster (a
// dynamic client: hybridnet's types are not compiled in) or from files, the
// pods and StatefulSets their IPInstances name, and estuary's own Networks,
// Subnets and the Nodes that the webhook's rules check the new objects
// against. A dry run from files reads nothing from the cluster; the pods
// and workloads then come from the files too, looked up in memory by the
// same workload.Of the manager uses.

import (
	"context"
	"fmt"
	"os"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/migrate"
	"github.com/estuary-cni/estuary/internal/workload"
)

func migrateInput(ctx context.Context, o *options, mo *migrateOptions) (migrate.Input, error) {
	in := migrate.Input{SecretNamespace: mo.secretNamespace, RetainTTL: mo.retainTTL}
	if len(mo.files) > 0 {
		if err := migrateFromFiles(ctx, o, mo.files, &in); err != nil {
			return in, err
		}
		if mo.dryRun {
			return in, nil
		}
	}
	k, err := o.newClient()
	if err != nil {
		return in, err
	}
	if len(mo.files) == 0 {
		if err := migrateFromCluster(ctx, o, k, &in); err != nil {
			return in, err
		}
	}
	return in, migrateExisting(ctx, k, mo.dryRun, &in.Existing)
}

// migrateFromFiles reads the files' objects: hybridnet's, and the pods,
// StatefulSets and pod owners among the rest.
func migrateFromFiles(ctx context.Context, o *options, files []string, in *migrate.Input) error {
	var objs []*unstructured.Unstructured
	for _, name := range files {
		read, err := migrateReadFile(o, name)
		if err != nil {
			return err
		}
		objs = append(objs, read...)
	}
	var rest []*unstructured.Unstructured
	in.Networks, in.Subnets, in.IPInstances, rest = migrate.Sort(objs)
	if len(in.Networks)+len(in.Subnets)+len(in.IPInstances) == 0 {
		return fmt.Errorf("the files hold no %s object", migrate.GroupVersion)
	}
	r, err := newMigrateReader(rest)
	if err != nil {
		return err
	}
	var pods []corev1.Pod
	var sets []appsv1.StatefulSet
	for _, u := range rest {
		switch u.GroupVersionKind() {
		case corev1.SchemeGroupVersion.WithKind("Pod"):
			var p corev1.Pod
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
				return fmt.Errorf("pod %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			pods = append(pods, p)
		case appsv1.SchemeGroupVersion.WithKind("StatefulSet"):
			var s appsv1.StatefulSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				return fmt.Errorf("statefulset %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			sets = append(sets, s)
		}
	}
	if len(pods) > 0 {
		if in.Pods, err = migratePods(ctx, r, pods); err != nil {
			return err
		}
	}
	if len(sets) > 0 {
		in.Sets = migrateSets(sets)
	}
	return nil
}

func migrateReadFile(o *options, name string) ([]*unstructured.Unstructured, error) {
	if name == "-" {
		return migrate.ReadObjects("standard input", o.streams.In)
	}
	f, err := os.Open(name) // #nosec G304 -- the operator names the file
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing is lost when closing fails
	return migrate.ReadObjects(name, f)
}

// migrateFromCluster lists hybridnet's objects, and the pods and
// StatefulSets of the namespaces its IPInstances are in.
func migrateFromCluster(ctx context.Context, o *options, k client.Client, in *migrate.Input) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("connect to the API server: %w", err)
	}
	for _, l := range []struct {
		res schema.GroupVersionResource
		dst *[]*unstructured.Unstructured
	}{
		{migrate.NetworksResource, &in.Networks}, {migrate.SubnetsResource, &in.Subnets}, {migrate.IPInstancesResource, &in.IPInstances},
	} {
		list, err := dyn.Resource(l.res).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return fmt.Errorf("list %s: hybridnet's CRDs are not installed (read exported objects with -f instead): %w", l.res.GroupResource(), err)
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", l.res.GroupResource(), err)
		}
		for i := range list.Items {
			*l.dst = append(*l.dst, &list.Items[i])
		}
	}
	in.Pods, in.Sets = map[string]migrate.Pod{}, map[string]migrate.Set{}
	var namespaces []string
	for _, u := range in.IPInstances {
		if !slices.Contains(namespaces, u.GetNamespace()) {
			namespaces = append(namespaces, u.GetNamespace())
		}
	}
	for _, ns := range namespaces {
		var pods corev1.PodList
		if err := k.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list pods of namespace %s: %w", ns, err)
		}
		owners, err := migrateOwners(ctx, k, ns)
		if err != nil {
			return err
		}
		got, err := migratePods(ctx, owners, pods.Items)
		if err != nil {
			return err
		}
		for key, p := range got {
			in.Pods[key] = p
		}
		var sets appsv1.StatefulSetList
		if err := k.List(ctx, &sets, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("list statefulsets of namespace %s: %w", ns, err)
		}
		for key, s := range migrateSets(sets.Items) {
			in.Sets[key] = s
		}
	}
	return nil
}

// migratePods is what migrate needs of each pod, its workload found by
// workload.Of over r.
func migratePods(ctx context.Context, r client.Reader, pods []corev1.Pod) (map[string]migrate.Pod, error) {
	out := make(map[string]migrate.Pod, len(pods))
	for i := range pods {
		p := &pods[i]
		owner, err := workload.Of(ctx, r, p)
		if err != nil {
			return nil, err
		}
		out[p.Namespace+"/"+p.Name] = migrate.Pod{UID: string(p.UID), Node: p.Spec.NodeName, Owner: owner,
			Finished: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed}
	}
	return out, nil
}

func migrateSets(sets []appsv1.StatefulSet) map[string]migrate.Set {
	out := make(map[string]migrate.Set, len(sets))
	for _, s := range sets {
		out[s.Namespace+"/"+s.Name] = migrate.Set{UID: string(s.UID), Replicas: ptr.Deref(s.Spec.Replicas, 1)}
	}
	return out
}

// migrateExisting reads the Nodes and estuary's Networks and Subnets; a dry
// run before estuary's CRDs are installed finds none.
func migrateExisting(ctx context.Context, k client.Client, dryRun bool, ex *migrate.Existing) error {
	var nodes corev1.NodeList
	if err := k.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	ex.Nodes = nodes.Items
	var networks estuaryv1.NetworkList
	err := k.List(ctx, &networks)
	if dryRun && (meta.IsNoMatchError(err) || apierrors.IsNotFound(err)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list estuary networks (are estuary's CRDs installed?): %w", err)
	}
	var subnets estuaryv1.SubnetList
	if err := k.List(ctx, &subnets); err != nil {
		return fmt.Errorf("list estuary subnets: %w", err)
	}
	ex.Networks, ex.Subnets = networks.Items, subnets.Items
	return nil
}

// migrateOwners reads, in one list per kind, the metadata of the
// namespace's objects of every kind workload.Of follows, so that the pods'
// workloads are found without an API call per pod.
func migrateOwners(ctx context.Context, k client.Client, ns string) (*migrateReader, error) {
	r := &migrateReader{objs: map[string]metav1.ObjectMeta{}}
	for i, gvk := range slices.Concat(workload.Owners, workload.Optional) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err := k.List(ctx, list, client.InNamespace(ns))
		if i >= len(workload.Owners) && meta.IsNoMatchError(err) {
			continue // KubeVirt or OpenKruise is not installed
		}
		if err != nil {
			return nil, fmt.Errorf("list %s of namespace %s: %w", gvk.Kind, ns, err)
		}
		for _, item := range list.Items {
			r.objs[migrateOwnerKey(gvk.GroupKind(), ns, item.Name)] = item.ObjectMeta
		}
	}
	return r, nil
}

// migrateReader answers workload.Of's reads of owner metadata from objects
// read beforehand (from files, or listed once).
type migrateReader struct {
	objs map[string]metav1.ObjectMeta // group/Kind/namespace/name
}

func migrateOwnerKey(gk schema.GroupKind, ns, name string) string {
	return gk.String() + "/" + ns + "/" + name
}

// newMigrateReader holds the metadata of the files' objects.
func newMigrateReader(objs []*unstructured.Unstructured) (*migrateReader, error) {
	r := &migrateReader{objs: map[string]metav1.ObjectMeta{}}
	for _, u := range objs {
		var m metav1.ObjectMeta
		if raw, ok := u.Object["metadata"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &m); err != nil {
				return nil, fmt.Errorf("%s %s/%s: metadata: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		}
		r.objs[migrateOwnerKey(u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName())] = m
	}
	return r, nil
}

func (r *migrateReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	pm, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("read %T: only object metadata was read beforehand", obj)
	}
	gvk := pm.GroupVersionKind()
	m, found := r.objs[migrateOwnerKey(gvk.GroupKind(), key.Namespace, key.Name)]
	if !found {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	pm.ObjectMeta = *m.DeepCopy()
	return nil
}

func (r *migrateReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("list: only object metadata was read beforehand")
}
