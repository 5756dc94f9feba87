package daemon

import (
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/kubeclient"
)

// validateClient checks the client's rate limit.
func (c Config) validateClient() []error {
	return kubeclient.Validate(c.KubeClientQPS, c.KubeClientBurst)
}

// RESTConfig is a copy of Kube carrying the client's rate limit
// (KubeClientQPS and KubeClientBurst, or kubeclient's defaults): every
// client the daemon builds is built from it. Nil when Kube is.
func (c Config) RESTConfig() *rest.Config {
	return kubeclient.Apply(c.Kube, c.KubeClientQPS, c.KubeClientBurst)
}
