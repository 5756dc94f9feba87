package manager

// The manager's API client and the pods it serves.
//
// --kube-client-qps and --kube-client-burst rate-limit every client the
// manager builds from its rest.Config (the cache's watches, the writes of
// IPInstances and statuses, the CRD upgrade), as hybridnet's manager flags
// of the same names do. The defaults are controller-runtime's (20 and 30),
// what the manager used before the flags existed.
//
// --pod-label-selector narrows what the manager serves, with hybridnet's
// meaning (its pod controller's pod selector): a pod it does not select is
// given no address, and the pod webhooks skip it. Such a pod is meant for
// another CNI, typically its default network named through Multus, so
// estuary's CNI is never called for it. Addresses a pod already holds
// (given before the selector changed) stay its own until it goes; a pod
// outside the selector is never given new ones, nor a StatefulSet's kept
// ones. The manager records a NotSelected event on such a pod, which the
// node daemon names in the error of a CNI ADD that waited for addresses in
// vain, so a pod sent to estuary by mistake fails with the cause.

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/kubeclient"
)

// validateClient checks the client and pod selection settings.
func (c Config) validateClient() []error {
	errs := kubeclient.Validate(c.KubeClientQPS, c.KubeClientBurst)
	if _, err := c.podSelector(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// podSelector parses PodLabelSelector; nil selects every pod.
func (c Config) podSelector() (labels.Selector, error) {
	if c.PodLabelSelector == "" {
		return nil, nil
	}
	sel, err := labels.Parse(c.PodLabelSelector)
	if err != nil {
		return nil, fmt.Errorf("--pod-label-selector=%q: %w", c.PodLabelSelector, err)
	}
	if sel.Empty() {
		return nil, nil
	}
	return sel, nil
}

// restConfig is Kube with the client rate limit.
func (c Config) restConfig() *rest.Config {
	return kubeclient.Apply(c.Kube, c.KubeClientQPS, c.KubeClientBurst)
}
