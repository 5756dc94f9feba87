package webhook

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
)

// Paths the webhook server serves.
const (
	PathValidateNetwork = "/validate-networking-estuary-io-v1-network"
	PathValidateSubnet  = "/validate-networking-estuary-io-v1-subnet"
	PathValidatePod     = "/validate-v1-pod"
	PathMutatePod       = "/mutate-v1-pod"
)

// ConfigurationName names both the ValidatingWebhookConfiguration and the
// MutatingWebhookConfiguration that Configurations builds.
const ConfigurationName = "estuary-webhook"

// Cache field indexes Setup registers and the delete checks list by.
const (
	// IndexSubnetNetwork indexes Subnets by spec.network.
	IndexSubnetNetwork = "spec.network"
	// IndexIPInstanceSubnet indexes IPInstances by spec.subnet.
	IndexIPInstanceSubnet = "spec.subnet"
	// IndexIPInstancePod indexes IPInstances by the namespace/name of the
	// pod in their binding.
	IndexIPInstancePod = "spec.binding.pod"
	// IndexIPInstanceWorkload indexes the IPInstances in a workload's pool
	// (see workload.PoolOf) by the workload's key.
	IndexIPInstanceWorkload = "spec.binding.workload"
)

// +kubebuilder:webhook:path=/validate-networking-estuary-io-v1-network,mutating=false,failurePolicy=fail,sideEffects=None,groups=networking.estuary.io,resources=networks,verbs=create;update;delete,versions=v1,name=network.validate.estuary.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-networking-estuary-io-v1-subnet,mutating=false,failurePolicy=fail,sideEffects=None,groups=networking.estuary.io,resources=subnets,verbs=create;update;delete,versions=v1,name=subnet.validate.estuary.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-v1-pod,mutating=false,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=pod.validate.estuary.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=pod.mutate.estuary.io,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded

// Options configure the handlers.
type Options struct {
	// Bounds are the administrator's tenancy bounds the pod rules apply
	// (the manager's --max-retain-ttl), the same the manager applies
	// before it allocates.
	Bounds netmodel.Bounds
	// Defaults are the cluster's defaults for what a pod does not say
	// (network type, IP family, StatefulSet retention), the same the
	// manager allocates by.
	Defaults netmodel.Defaults
	// Scope says which pods the pod handlers act on; the others are
	// admitted unchanged (see podscope.go).
	Scope PodScope
}

// Setup registers the cache indexes the handlers list by, the metadata
// informers workload.Of reads, and the four handlers on mgr's webhook
// server: Prepare and Register.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) error {
	if err := Prepare(ctx, mgr); err != nil {
		return err
	}
	Register(mgr, opts)
	return nil
}

// Prepare registers in mgr's cache, before it starts, what the handlers
// read: the indexes of AddIndexes and the owners' metadata informers
// (workload.Watch).
func Prepare(ctx context.Context, mgr manager.Manager) error {
	if err := AddIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return workload.Watch(ctx, mgr.GetCache())
}

// Register adds the four handlers to mgr's webhook server, which it adds to
// mgr's runnables if it is not already. The handlers read mgr's cache, which
// must have the indexes of AddIndexes, and confirm a refusal, or look up a
// network the cache does not know yet, with its API reader. Register may be called after mgr has
// started, e.g. once the serving certificate is in place.
func Register(mgr manager.Manager, opts Options) {
	srv, scheme, r, live := mgr.GetWebhookServer(), mgr.GetScheme(), mgr.GetClient(), mgr.GetAPIReader()
	pods := &PodValidator{Reader: workload.LiveOptional(r, live), Live: live, Bounds: opts.Bounds, Layouts: netmodel.NewLayouts(), Scope: opts.Scope, Defaults: opts.Defaults}
	srv.Register(PathValidateNetwork, admission.WithValidator(scheme, &NetworkValidator{Reader: r, Live: live}))
	srv.Register(PathValidateSubnet, admission.WithValidator(scheme, &SubnetValidator{Reader: r, Live: live}))
	srv.Register(PathValidatePod, admission.WithValidator(scheme, pods))
	srv.Register(PathMutatePod, admission.WithDefaulter(scheme, &PodDefaulter{Reader: workload.LiveOptional(r, live), Live: live, Scope: opts.Scope, Defaults: opts.Defaults}))
}

// fieldIndex is one index of the webhook's cache.
type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// fieldIndexes are the indexes the webhook's lists rely on.
var fieldIndexes = []fieldIndex{
	{&estuaryv1.Subnet{}, IndexSubnetNetwork, func(o client.Object) []string {
		return []string{o.(*estuaryv1.Subnet).Spec.Network}
	}},
	{&estuaryv1.IPInstance{}, IndexIPInstanceSubnet, func(o client.Object) []string {
		return []string{o.(*estuaryv1.IPInstance).Spec.Subnet}
	}},
	{&estuaryv1.IPInstance{}, IndexIPInstancePod, func(o client.Object) []string {
		b := o.(*estuaryv1.IPInstance).Spec.Binding
		return []string{b.Namespace + "/" + b.PodName}
	}},
	{&estuaryv1.IPInstance{}, IndexIPInstanceWorkload, func(o client.Object) []string {
		if pool, ok := workload.PoolOf(o.(*estuaryv1.IPInstance)); ok {
			return []string{pool.Key()}
		}
		return nil
	}},
}

// AddIndexes registers IndexSubnetNetwork, IndexIPInstanceSubnet,
// IndexIPInstancePod and IndexIPInstanceWorkload. It must be called before
// mgr's cache starts.
func AddIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range fieldIndexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// Service is where the API server reaches the webhook: a Service in the
// cluster, the port it exposes, and the CA bundle that signs its serving
// certificate (may be empty when something else injects it).
type Service struct {
	Namespace, Name string
	Port            int32
	CABundle        []byte
	// PodFailurePolicy is the failure policy of the pod webhooks; empty
	// means Ignore: creating a pod must not depend on the webhook being up,
	// and the manager re-checks the pod rules before it allocates.
	PodFailurePolicy admissionregistrationv1.FailurePolicyType
	// TimeoutSeconds bounds the Network and Subnet webhooks (0: 10), and
	// PodTimeoutSeconds the pod webhooks (0: 5), short because every pod
	// create waits for them.
	TimeoutSeconds, PodTimeoutSeconds int32
	// PodSelector, when set, narrows the pod webhooks to the pods it
	// selects: the manager's --pod-label-selector. The pod webhooks always
	// skip pods that opted out (OptOutRequirements).
	PodSelector *metav1.LabelSelector
}

// Defaults of Service's failure policy and timeouts.
const (
	DefaultPodFailurePolicy  = admissionregistrationv1.Ignore
	DefaultTimeoutSeconds    = 10
	DefaultPodTimeoutSeconds = 5
)

func (svc Service) podFailurePolicy() admissionregistrationv1.FailurePolicyType {
	if svc.PodFailurePolicy == "" {
		return DefaultPodFailurePolicy
	}
	return svc.PodFailurePolicy
}

func (svc Service) timeout() int32 {
	if svc.TimeoutSeconds == 0 {
		return DefaultTimeoutSeconds
	}
	return svc.TimeoutSeconds
}

func (svc Service) podTimeout() int32 {
	if svc.PodTimeoutSeconds == 0 {
		return DefaultPodTimeoutSeconds
	}
	return svc.PodTimeoutSeconds
}

// Configurations builds the webhook configurations the markers above
// describe, pointing at svc, both named ConfigurationName. The Network and
// Subnet webhooks fail closed (Fail). The pod webhooks use svc's pod
// failure policy (default Ignore), skip kube-system and the webhook's
// own namespace, so that the webhook's own pods (and the cluster's) can
// start while it is down, and skip pods that opted out or that
// svc.PodSelector does not select (podObjectSelector). charts/estuary renders the same configurations
// (test/chart compares them).
func Configurations(svc Service) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	networks := rule([]string{estuaryv1.GroupVersion.Group}, []string{"networks"}, create, update, del)
	subnets := rule([]string{estuaryv1.GroupVersion.Group}, []string{"subnets"}, create, update, del)
	pods := rule([]string{""}, []string{"pods"}, create)
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validatingHook("network.validate.estuary.io", svc, PathValidateNetwork, networks),
			validatingHook("subnet.validate.estuary.io", svc, PathValidateSubnet, subnets),
			validatingHook("pod.validate.estuary.io", svc, PathValidatePod, pods),
		},
	}
	validating.Webhooks[2].NamespaceSelector = skipSystem(svc)
	validating.Webhooks[2].ObjectSelector = podObjectSelector(svc)
	validating.Webhooks[2].FailurePolicy = ptr.To(svc.podFailurePolicy())
	validating.Webhooks[2].TimeoutSeconds = ptr.To(svc.podTimeout())
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pod.mutate.estuary.io",
			ClientConfig:            clientConfig(svc, PathMutatePod),
			Rules:                   []admissionregistrationv1.RuleWithOperations{pods},
			NamespaceSelector:       skipSystem(svc),
			ObjectSelector:          podObjectSelector(svc),
			FailurePolicy:           ptr.To(svc.podFailurePolicy()),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			TimeoutSeconds:          ptr.To(svc.podTimeout()),
		}},
	}
	return validating, mutating
}

// skipSystem selects every namespace but kube-system and svc's.
func skipSystem(svc Service) *metav1.LabelSelector {
	values := []string{metav1.NamespaceSystem}
	if svc.Namespace != metav1.NamespaceSystem {
		values = append(values, svc.Namespace)
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: values,
	}}}
}

const (
	create = admissionregistrationv1.Create
	update = admissionregistrationv1.Update
	del    = admissionregistrationv1.Delete
)

func rule(groups, resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: groups, APIVersions: []string{"v1"}, Resources: resources,
			Scope: ptr.To(admissionregistrationv1.AllScopes),
		},
	}
}

func validatingHook(name string, svc Service, path string, r admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            clientConfig(svc, path),
		Rules:                   []admissionregistrationv1.RuleWithOperations{r},
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptr.To(svc.timeout()),
	}
}

func clientConfig(svc Service, path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{
			Namespace: svc.Namespace, Name: svc.Name, Path: ptr.To(path), Port: ptr.To(svc.Port),
		},
		CABundle: svc.CABundle,
	}
}
