package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/internal/redact"
)

// maxListObjects bounds the objects of one kind a dump keeps.
const maxListObjects = 50000

// kindSpec says which objects of a kind a dump collects.
type kindSpec struct {
	gvk schema.GroupVersionKind
	// estuary keeps only objects labelled app.kubernetes.io/part-of=estuary.
	estuary bool
	// inEstuaryNamespaces lists only the namespaces estuary runs in.
	inEstuaryNamespaces bool
	// keep, when set, filters the objects listed.
	keep func(*unstructured.Unstructured) bool
	// file overrides the archive file's name (default: resource.group).
	file string
}

func gvk(group, version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}

// chartKinds are the kinds of what the chart and the manager create, all
// labelled part-of=estuary. Secrets are not among them, by design.
var chartKinds = []schema.GroupVersionKind{
	gvk("apps", "v1", "Deployment"), gvk("apps", "v1", "DaemonSet"), gvk("apps", "v1", "ReplicaSet"),
	gvk("", "v1", "Pod"), gvk("", "v1", "ConfigMap"), gvk("", "v1", "Service"), gvk("", "v1", "ServiceAccount"),
	gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"), gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
	gvk("rbac.authorization.k8s.io", "v1", "Role"), gvk("rbac.authorization.k8s.io", "v1", "RoleBinding"),
	gvk("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
	gvk("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
	gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy"),
	gvk("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding"),
	gvk("policy", "v1", "PodDisruptionBudget"),
	gvk("monitoring.coreos.com", "v1", "ServiceMonitor"), gvk("monitoring.coreos.com", "v1", "PodMonitor"),
	gvk("monitoring.coreos.com", "v1", "PrometheusRule"),
}

// policyKinds are the policies the daemons enforce, collected from every
// namespace whoever made them: what decides a dropped packet.
var policyKinds = []schema.GroupVersionKind{
	gvk("networking.k8s.io", "v1", "NetworkPolicy"),
	gvk("policy.networking.k8s.io", "v1beta1", "ClusterNetworkPolicy"),
}

// podNetworkEventReasons are the kubelet's reasons for Events about pod
// networking, collected from every namespace.
var podNetworkEventReasons = []string{"FailedCreatePodSandBox", "FailedKillPod", "NetworkNotReady"}

// found is what the object pass learned for the logs and the nodes.
type found struct {
	pods       []corev1.Pod // the manager's and the daemons' pods
	nodes      []string
	namespaces []string
}

// collectObjects writes the objects under resources/ and returns the
// estuary pods and the nodes.
func (d *dump) collectObjects(ctx context.Context, namespace string) found {
	var fd found
	if v, err := d.cs.Discovery().ServerVersion(); err != nil {
		d.failed("cluster version: %v", err)
	} else {
		d.sum.Cluster = v.GitVersion
	}
	comps, err := serverComponents(ctx, d.k, namespace)
	if err != nil {
		d.failed("estuary's workloads: %v", err)
	}
	d.sum.Components = comps
	for _, c := range comps {
		if !slices.Contains(fd.namespaces, c.Namespace) {
			fd.namespaces = append(fd.namespaces, c.Namespace)
		}
	}
	slices.Sort(fd.namespaces)
	d.sum.Namespaces = fd.namespaces
	if len(comps) == 0 {
		d.failed("no estuary manager or daemon found (workloads labelled %s=estuary): logs, events and node state of estuary are missing", partOfLabel)
	}

	nodes := d.collectKind(ctx, kindSpec{gvk: gvk("", "v1", "Node")}, fd.namespaces)
	for _, n := range nodes {
		fd.nodes = append(fd.nodes, n.GetName())
	}
	crds := d.collectKind(ctx, kindSpec{gvk: gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), keep: isEstuaryCRD}, fd.namespaces)
	crdKinds := []string{}
	for _, crd := range crds {
		g, ok := crdKind(crd)
		if !ok {
			continue
		}
		crdKinds = append(crdKinds, g.Kind)
		d.collectKind(ctx, kindSpec{gvk: g}, fd.namespaces)
	}
	for _, g := range chartKinds {
		items := d.collectKind(ctx, kindSpec{gvk: g, estuary: true}, fd.namespaces)
		if g.Kind == "Pod" {
			fd.pods = estuaryPods(d, items)
		}
	}
	for _, g := range policyKinds {
		d.collectKind(ctx, kindSpec{gvk: g}, fd.namespaces)
	}
	d.collectKind(ctx, kindSpec{gvk: gvk("", "v1", "ConfigMap"), file: "configmaps.kube-proxy", keep: func(u *unstructured.Unstructured) bool {
		return u.GetNamespace() == "kube-system" && u.GetName() == "kube-proxy"
	}}, fd.namespaces)
	d.collectKind(ctx, kindSpec{gvk: gvk("coordination.k8s.io", "v1", "Lease"), inEstuaryNamespaces: true, keep: func(u *unstructured.Unstructured) bool {
		return strings.HasPrefix(u.GetName(), "estuary")
	}}, fd.namespaces)
	d.collectEvents(ctx, fd.namespaces, crdKinds)
	return fd
}

// isEstuaryCRD keeps the CRDs of estuary's API groups.
func isEstuaryCRD(u *unstructured.Unstructured) bool {
	g, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	return g == "estuary.io" || strings.HasSuffix(g, ".estuary.io")
}

// crdKind is the kind a CRD serves, at its storage version.
func crdKind(crd unstructured.Unstructured) (schema.GroupVersionKind, bool) {
	g, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	k, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if storage, _ := m["storage"].(bool); storage {
			name, _ := m["name"].(string)
			return gvk(g, name, k), g != "" && k != "" && name != ""
		}
	}
	return schema.GroupVersionKind{}, false
}

// estuaryPods are the manager's and daemons' pods among items.
func estuaryPods(d *dump, items []unstructured.Unstructured) []corev1.Pod {
	var out []corev1.Pod
	for _, u := range items {
		if !slices.Contains(estuaryWorkloads, u.GetLabels()[nameLabel]) {
			continue
		}
		var p corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			d.failed("pod %s/%s: %v", u.GetNamespace(), u.GetName(), err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// collectKind lists the objects s selects and writes them, redacted, to
// resources/<file>.yaml. A kind the API server does not serve is skipped
// quietly. It returns the objects as listed, before redaction.
func (d *dump) collectKind(ctx context.Context, s kindSpec, namespaces []string) []unstructured.Unstructured {
	m, err := d.k.RESTMapper().RESTMapping(s.gvk.GroupKind(), s.gvk.Version)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		d.failed("%s: %v", s.gvk.Kind, err)
		return nil
	}
	file := s.file
	if file == "" {
		file = m.Resource.Resource
		if m.Resource.Group != "" {
			file += "." + m.Resource.Group
		}
	}
	var opts []client.ListOption
	if s.estuary {
		opts = append(opts, client.MatchingLabels{partOfLabel: "estuary"})
	}
	scopes := []string{""}
	if s.inEstuaryNamespaces {
		scopes = namespaces
	}
	var items []unstructured.Unstructured
	for _, ns := range scopes {
		got, err := d.list(ctx, s.gvk, append(opts, client.InNamespace(ns))...)
		if err != nil {
			d.failed("%s: %v", file, err)
		}
		items = append(items, got...)
	}
	if s.keep != nil {
		items = slices.DeleteFunc(items, func(u unstructured.Unstructured) bool { return !s.keep(&u) })
	}
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	d.writeObjects("resources/"+file+".yaml", items)
	return items
}

// list lists every object of a kind, a page at a time, up to
// maxListObjects.
func (d *dump) list(ctx context.Context, g schema.GroupVersionKind, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	var out []unstructured.Unstructured
	cont := ""
	for {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(g.GroupVersion().WithKind(g.Kind + "List"))
		if err := d.k.List(ctx, l, append(opts, client.Limit(500), client.Continue(cont))...); err != nil {
			return out, fmt.Errorf("list %s: %w", g.Kind, err)
		}
		out = append(out, l.Items...)
		cont = l.GetContinue()
		if cont == "" {
			return out, nil
		}
		if len(out) >= maxListObjects {
			return out, fmt.Errorf("list %s: stopped at %d objects", g.Kind, len(out))
		}
	}
}

// writeObjects writes items, redacted and without managedFields, as one
// YAML List in their order.
func (d *dump) writeObjects(name string, items []unstructured.Unstructured) {
	list := make([]any, 0, len(items))
	n := 0
	for _, u := range items {
		obj := runtime.DeepCopyJSON(u.Object)
		unstructured.RemoveNestedField(obj, "metadata", "managedFields")
		n += redact.Object(obj)
		list = append(list, obj)
	}
	d.redactedN(n)
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": list})
	if err != nil {
		d.failed("%s: %v", name, err)
		return
	}
	d.a.add(name, b)
	d.mu.Lock()
	d.sum.Objects[name] = len(items)
	d.mu.Unlock()
}

// collectEvents writes the Events of estuary's namespaces, and those of
// every namespace about Nodes, about estuary's objects and about pod
// networking, newest last, to resources/events.yaml.
func (d *dump) collectEvents(ctx context.Context, namespaces, crdKinds []string) {
	ev := gvk("", "v1", "Event")
	var queries [][]client.ListOption
	for _, ns := range namespaces {
		queries = append(queries, []client.ListOption{client.InNamespace(ns)})
	}
	for _, k := range append([]string{"Node"}, crdKinds...) {
		queries = append(queries, []client.ListOption{client.MatchingFields{"involvedObject.kind": k}})
	}
	for _, r := range podNetworkEventReasons {
		queries = append(queries, []client.ListOption{client.MatchingFields{"reason": r}})
	}
	seen := map[string]bool{}
	var items []unstructured.Unstructured
	for _, q := range queries {
		got, err := d.list(ctx, ev, q...)
		if err != nil {
			d.failed("events: %v", err)
		}
		for _, e := range got {
			if seen[string(e.GetUID())] || !d.recent(lastHappened(e)) {
				continue
			}
			seen[string(e.GetUID())] = true
			items = append(items, e)
		}
	}
	slices.SortStableFunc(items, func(a, b unstructured.Unstructured) int { return lastHappened(a).Compare(lastHappened(b)) })
	d.writeObjects("resources/events.yaml", items)
}

// recent reports whether t is within --since (always, without it).
func (d *dump) recent(t time.Time) bool {
	return d.f.since == 0 || t.IsZero() || t.After(d.start.Add(-d.f.since))
}

// lastHappened is when an Event last happened.
func lastHappened(e unstructured.Unstructured) time.Time {
	for _, f := range [][]string{{"lastTimestamp"}, {"series", "lastObservedTime"}, {"eventTime"}} {
		if s, ok, _ := unstructured.NestedString(e.Object, f...); ok && s != "" {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t
			}
		}
	}
	return e.GetCreationTimestamp().Time
}
