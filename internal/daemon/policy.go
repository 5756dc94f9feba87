package daemon

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// policyPart is the loop's policy part and the table it writes; nil when
// the daemon does not enforce policy.
type policyPart struct {
	*datapath.PolicyPart
	table *ops.Policy
	// verdicts sits between the part and table (policyverdicts.go).
	verdicts *policyVerdicts
}

// clusterPolicyServed says whether the API server serves
// ClusterNetworkPolicy at the version the daemon reads
// (policy.networking.k8s.io/v1beta1, network-policy-api v0.3.0). Without
// it the daemon enforces NetworkPolicy alone: an older CRD
// (v1alpha2) is not read, because its objects would be read with another
// version's shape. A CRD installed later is seen at the daemon's next
// start.
func clusterPolicyServed(m meta.RESTMapper) (bool, error) {
	gv := npv1beta1.GroupVersion
	_, err := m.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: "ClusterNetworkPolicy"}, gv.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover ClusterNetworkPolicy: %w", err)
	}
	return true, nil
}

// startPolicy registers the policy objects' informers with c (before it
// starts) and opens the node's policy table; with cfg.NetworkPolicy off it
// removes a previous daemon's table instead and returns nil. The part reads
// every pod of the cluster from a view of its own (datapath.PodView), run
// while a policy exists.
func startPolicy(ctx context.Context, cfg Config, scheme *runtime.Scheme, live client.Client, c cache.Cache,
	t *datapath.Trigger) (*policyPart, error) {
	table, err := ops.OpenPolicy(cfg.HostNetns)
	if err != nil {
		return nil, fmt.Errorf("policy table: %w", err)
	}
	if !cfg.NetworkPolicy {
		defer table.Close()
		removed, err := table.Remove()
		if err != nil {
			return nil, fmt.Errorf("network policy off: %w", err)
		}
		log.Info("network policy off", "removedTable", removed)
		return nil, nil
	}
	admin, err := clusterPolicyServed(live.RESTMapper())
	if err != nil {
		table.Close()
		return nil, err
	}
	if err := t.WatchPolicy(ctx, c, admin); err != nil {
		table.Close()
		return nil, fmt.Errorf("network policy: %w", err)
	}
	anp, banp, err := adminNetworkPoliciesServed(live.RESTMapper())
	if err == nil {
		err = t.WatchAdminNetworkPolicies(ctx, c, anp, banp)
	}
	if err != nil {
		table.Close()
		return nil, fmt.Errorf("network policy: %w", err)
	}
	log.Info("v1alpha1 admin network policies", "adminNetworkPolicy", anp, "baselineAdminNetworkPolicy", banp)
	log.Info("network policy enforced", "table", "inet "+policy.TableName, "clusterNetworkPolicy", admin,
		"podToNodeTraffic", cfg.PodToNodeTraffic)
	pods := datapath.NewPodView(ctx, func() (cache.Cache, error) {
		return cache.New(cfg.Kube, cache.Options{Scheme: scheme, DefaultTransform: policyPodTransform})
	}, t)
	toNode, err := policy.ParsePodToNode(cfg.PodToNodeTraffic)
	if err != nil {
		table.Close()
		return nil, fmt.Errorf("--pod-to-node-traffic: %w", err)
	}
	verdicts := newPolicyVerdicts(table, cfg.NodeName)
	dropLog, err := openDropLog(cfg.HostNetns)
	verdicts.listen(ctx, dropLog, err)
	part := datapath.NewPolicyPart(datapath.PolicyConfig{Reader: c, Pods: pods, Admin: admin, HostVeth: hostVeth,
		AdminNetworkPolicy: anp, BaselineAdminNetworkPolicy: banp,
		PodToNode: toNode, Log: log.WithName("datapath")}, verdicts)
	return &policyPart{PolicyPart: part, table: table, verdicts: verdicts}, nil
}

// gate is the CNI server's policy gate: the part, or nil without policy.
func (p *policyPart) gate() cniserver.PolicyGate {
	if p == nil {
		return nil
	}
	return p.PolicyPart
}

// admitFrom gives the part the endpoint store the CNI server writes before
// it admits an endpoint (datapath.PolicyPart.AdmitFrom).
func (p *policyPart) admitFrom(eps datapath.Endpoints) {
	if p != nil {
		p.AdmitFrom(eps)
	}
}

// Close releases the table's namespace handle; the table stays, so pods
// keep their policy while the daemon restarts.
func (p *policyPart) Close() {
	if p != nil {
		p.verdicts.close()
		p.table.Close()
	}
}

// policyPodTransform keeps of a cached Pod what policy reads (labels,
// host network, node, container ports, phase and addresses) so that a
// node's view of every pod in the cluster stays small.
func policyPodTransform(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	out.ManagedFields, out.Annotations, out.OwnerReferences = nil, nil, nil
	out.Spec.HostNetwork, out.Spec.NodeName = pod.Spec.HostNetwork, pod.Spec.NodeName
	out.Spec.Containers = portsOnly(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && len(c.Ports) > 0 {
			out.Spec.InitContainers = append(out.Spec.InitContainers,
				corev1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
		}
	}
	out.Status.Phase, out.Status.PodIP, out.Status.PodIPs = pod.Status.Phase, pod.Status.PodIP, pod.Status.PodIPs
	return out, nil
}

func portsOnly(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		if len(c.Ports) > 0 {
			out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	return out
}

// openDropLog opens the node's netlink log of policy drops; nil and why
// when it cannot.
func openDropLog(nsPath string) (dropSource, error) {
	l, err := ops.OpenDropLog(nsPath)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// collectors are the part's metrics: the table's verdict counters.
func (p *policyPart) collectors() []prometheus.Collector {
	if p == nil {
		return nil
	}
	return []prometheus.Collector{verdictCollector{p.verdicts}}
}

// drops is what /debug/policy/drops serves: nil without policy.
func (p *policyPart) drops() *policyVerdicts {
	if p == nil {
		return nil
	}
	return p.verdicts
}

// removePolicy deletes the policy table (uninstall).
func removePolicy(nsPath string) error {
	table, err := ops.OpenPolicy(nsPath)
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	defer table.Close()
	if _, err := table.Remove(); err != nil {
		return fmt.Errorf("uninstall: policy: %w", err)
	}
	return nil
}
