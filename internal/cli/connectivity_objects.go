package cli

// The objects of a connectivity test all live in its own namespace, which
// carries the plugin's labels: a namespace of that name without them is
// never touched, and one with them (left by --keep or an interrupted run)
// is deleted before a new run. Deleting the namespace removes everything
// the test made, including the addresses the StatefulSet kept (estuary
// releases what a namespace being deleted keeps). The namespace allows
// privileged pods (Pod Security admission) for the host-network probe.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Labels of everything a connectivity test makes.
const (
	connNameLabel  = "app.kubernetes.io/name"
	connName       = "estuary-connectivity-test"
	connOwnerLabel = "app.kubernetes.io/managed-by"
	connOwner      = "kubectl-estuary"
	connRoleLabel  = "app.kubernetes.io/component"
	psaEnforce     = "pod-security.kubernetes.io/enforce"
)

// pollEvery is how often the test re-reads what it waits for.
const pollEvery = 500 * time.Millisecond

func connLabels(role string) map[string]string {
	l := map[string]string{connNameLabel: connName, connOwnerLabel: connOwner}
	if role != "" {
		l[connRoleLabel] = role
	}
	return l
}

// ownNamespace says whether ns was made by a connectivity test.
func ownNamespace(ns *corev1.Namespace) bool {
	return ns.Labels[connNameLabel] == connName && ns.Labels[connOwnerLabel] == connOwner
}

// probeSpec is the pod spec of a probe: netexec, or pause on the host
// network, pinned to node.
func probeSpec(p probePod, image string) corev1.PodSpec {
	args := []string{"netexec", fmt.Sprintf("--http-port=%d", netexecPort)}
	if p.HostNetwork {
		args = []string{"pause"}
	}
	return corev1.PodSpec{
		Affinity:                      onNode(p.Node),
		HostNetwork:                   p.HostNetwork,
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{
			Name: probeContainer, Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Args: args,
		}},
	}
}

// onNode is the affinity that puts a pod on node, as a DaemonSet's pods
// are put: through the scheduler, which waits for what else the pod
// requires (the node affinity estuary's webhook adds for an Underlay
// network), rather than binding it at once.
func onNode(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// affinityNode is the node onNode put in spec, or "".
func affinityNode(spec *corev1.PodSpec) string {
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// probeObject is the Pod of p in ns.
func probeObject(p probePod, ns, image string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, Labels: connLabels(p.Name)},
		Spec:       probeSpec(p, image),
	}
	if p.Network != "" {
		pod.Annotations = map[string]string{estuaryv1.AnnotationNetwork: p.Network}
	}
	return pod
}

// retainObject is the StatefulSet whose only pod is re-created during the
// test. OnDelete: changing its node moves nothing until the pod is deleted.
func retainObject(ns, node, image string) *appsv1.StatefulSet {
	sel := connLabels(probeRetain)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: probeRetain, Labels: connLabels(probeRetain)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			ServiceName:         probeRetain,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Selector:            &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       probeSpec(probePod{Node: node}, image),
			},
		},
	}
}

// serviceObject is the ClusterIP Service over the plan's backend pod.
func serviceObject(ns, backend string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: probeService, Labels: connLabels(probeService)},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{connNameLabel: connName, connRoleLabel: backend},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: servicePort, TargetPort: intstr.FromInt32(netexecPort), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// Names of the policy paths' NetworkPolicies.
const (
	policyDenyName  = "deny-ingress"
	policyAllowName = "allow-client"
)

// roleSelector selects the probe of role.
func roleSelector(role string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{connNameLabel: connName, connRoleLabel: role}}
}

// denyIngressObject is the default-deny ingress NetworkPolicy of the
// policy target: it selects the target and admits nothing.
func denyIngressObject(ns string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: policyDenyName, Labels: connLabels(policyDenyName)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: roleSelector(probePolicyTarget),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}

// allowClientObject admits the client probe to the policy target on
// netexec's port, and nothing else.
func allowClientObject(ns string) *networkingv1.NetworkPolicy {
	client := roleSelector(probeClient)
	port := intstr.FromInt32(netexecPort)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: policyAllowName, Labels: connLabels(policyAllowName)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: roleSelector(probePolicyTarget),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &client}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}},
			}},
		},
	}
}

// prepareNamespace creates ns, after deleting a namespace of that name an
// earlier test left; one the plugin did not make is refused.
func prepareNamespace(ctx context.Context, k client.Client, ns string, timeout time.Duration, say func(string, ...any)) error {
	var old corev1.Namespace
	err := k.Get(ctx, client.ObjectKey{Name: ns}, &old)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("read namespace %s: %w", ns, err)
	case !ownNamespace(&old):
		return fmt.Errorf("namespace %s exists and was not made by a connectivity test (no %s=%s label); choose another with --test-namespace",
			ns, connNameLabel, connName)
	default:
		say("deleting namespace %s, left by an earlier connectivity test", ns)
		if err := deleteNamespace(ctx, k, ns, timeout); err != nil {
			return err
		}
	}
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: connLabels("")}}
	obj.Labels[psaEnforce] = "privileged"
	if err := k.Create(ctx, obj); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// createProbes creates the plan's pods, its StatefulSet and its Service.
func createProbes(ctx context.Context, k client.Client, p connPlan, image string) error {
	objs := []client.Object{serviceObject(p.Namespace, probeOther), retainObject(p.Namespace, p.RetainFrom, image)}
	for _, pod := range p.Pods {
		objs = append(objs, probeObject(pod, p.Namespace, image))
	}
	for _, o := range objs {
		if err := k.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s/%s: %w", o, p.Namespace, o.GetName(), err)
		}
	}
	return nil
}

// waitProbes waits up to timeout until every probe pod of the plan, and
// the StatefulSet's pod, is Ready, and returns the pods that are, and why
// each other one is not.
func waitProbes(ctx context.Context, k client.Client, p connPlan, timeout time.Duration) (map[string]*corev1.Pod, map[string]string, error) {
	names := []string{retainPod}
	for _, pod := range p.Pods {
		names = append(names, pod.Name)
	}
	ready := map[string]*corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, pollEvery, timeout, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := k.List(ctx, &pods, client.InNamespace(p.Namespace), client.MatchingLabels{connNameLabel: connName}); err != nil {
			return false, nil //nolint:nilerr // a failed read is retried until the deadline
		}
		clear(ready)
		for i := range pods.Items {
			if pod := &pods.Items[i]; slices.Contains(names, pod.Name) && podIsReady(pod) {
				ready[pod.Name] = pod
			}
		}
		return len(ready) == len(names), nil
	})
	if err != nil && ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	notReady := map[string]string{}
	for _, name := range names {
		if ready[name] == nil {
			notReady[name] = podProblem(ctx, k, p.Namespace, name, timeout)
		}
	}
	return ready, notReady, nil
}

// podIsReady says whether pod runs, is Ready and has its addresses.
func podIsReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || len(pod.Status.PodIPs) == 0 {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podProblem says why pod ns/name is not Ready: its phase, its
// containers' waiting reasons and its latest warning event (a CNI error
// is only there).
func podProblem(ctx context.Context, k client.Client, ns, name string, waited time.Duration) string {
	var pod corev1.Pod
	if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		return fmt.Sprintf("not Ready after %s: %v", waited, err)
	}
	parts := []string{string(pod.Status.Phase)}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, strings.TrimSpace(w.Reason+" "+w.Message))
		}
	}
	if ev := latestWarning(ctx, k, &pod); ev != "" {
		parts = append(parts, "event "+ev)
	}
	return fmt.Sprintf("not Ready after %s: %s", waited, strings.Join(parts, "; "))
}

func latestWarning(ctx context.Context, k client.Client, pod *corev1.Pod) string {
	var evs corev1.EventList
	if err := k.List(ctx, &evs, client.InNamespace(pod.Namespace)); err != nil {
		return ""
	}
	var mine []corev1.Event
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == pod.Name && e.InvolvedObject.UID == pod.UID {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		return ""
	}
	sort.Slice(mine, func(i, j int) bool { return eventTime(&mine[i]).Before(eventTime(&mine[j])) })
	last := mine[len(mine)-1]
	return fmt.Sprintf("%s: %s", last.Reason, last.Message)
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// errNamespaceStays is returned (wrapped) when the namespace outlives the
// cleanup timeout.
var errNamespaceStays = errors.New("namespace not deleted")

// deleteNamespace deletes ns and waits up to timeout until it is gone.
func deleteNamespace(ctx context.Context, k client.Client, ns string, timeout time.Duration) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := k.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	var last string
	// Each read takes the caller's context, not the poll's: a read cut by
	// the poll's deadline would replace the namespace's last state.
	err := wait.PollUntilContextTimeout(ctx, pollEvery, timeout, true, func(context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKey{Name: ns}, obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		last = namespaceState(obj, err)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s still there after %s: %s", errNamespaceStays, ns, timeout, last)
	}
	return nil
}

func namespaceState(ns *corev1.Namespace, err error) string {
	if err != nil {
		return err.Error()
	}
	s := string(ns.Status.Phase)
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			s += fmt.Sprintf("; %s: %s", c.Type, c.Message)
		}
	}
	return s
}

// recreateRetained moves the StatefulSet's pod to node: it sets the
// template's node affinity, waits until the StatefulSet controller has seen it,
// deletes the pod and waits up to timeout for its successor to be Ready.
func recreateRetained(ctx context.Context, k client.Client, ns, node string, before *corev1.Pod, timeout time.Duration) (*corev1.Pod, error) {
	var sts appsv1.StatefulSet
	if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: probeRetain}, &sts); err != nil {
		return nil, fmt.Errorf("read statefulset %s/%s: %w", ns, probeRetain, err)
	}
	oldRev := sts.Status.UpdateRevision
	if affinityNode(&sts.Spec.Template.Spec) != node {
		orig := sts.DeepCopy()
		sts.Spec.Template.Spec.Affinity = onNode(node)
		if err := k.Patch(ctx, &sts, client.MergeFrom(orig)); err != nil {
			return nil, fmt.Errorf("move statefulset %s/%s to node %s: %w", ns, probeRetain, node, err)
		}
		err := wait.PollUntilContextTimeout(ctx, pollEvery, timeout, true, func(ctx context.Context) (bool, error) {
			err := k.Get(ctx, client.ObjectKeyFromObject(&sts), &sts)
			return err == nil && sts.Status.ObservedGeneration >= sts.Generation && sts.Status.UpdateRevision != oldRev, nil
		})
		if err != nil {
			return nil, fmt.Errorf("statefulset %s/%s: the controller did not take the new template within %s", ns, probeRetain, timeout)
		}
	}
	if err := k.Delete(ctx, before, client.Preconditions{UID: &before.UID}); err != nil {
		return nil, fmt.Errorf("delete pod %s/%s: %w", ns, before.Name, err)
	}
	var after corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, pollEvery, timeout, true, func(ctx context.Context) (bool, error) {
		err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: before.Name}, &after)
		return err == nil && after.UID != before.UID && podIsReady(&after), nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s re-created: %s", ns, before.Name, podProblem(ctx, k, ns, before.Name, timeout))
	}
	return &after, nil
}
