package manager

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/controller/podipam"
	"github.com/estuary-cni/estuary/internal/kubeclient"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/webhook"
	"github.com/estuary-cni/estuary/internal/workload"
)

// Defaults of the manager's settings; each is also the default of the flag
// of the same name in cmd/estuary-manager.
const (
	DefaultMetricsAddr    = ":9780"
	DefaultProbeAddr      = ":9781"
	DefaultWorkers        = 16
	DefaultWebhookService = "estuary-webhook"
	DefaultMaxRetainTTL   = netmodel.DefaultMaxRetainTTL
	// DefaultAddressHistoryMaxEntries and DefaultAddressHistoryMaxAge
	// bound each address's history.
	DefaultAddressHistoryMaxEntries = podipam.DefaultHistoryMaxEntries
	DefaultAddressHistoryMaxAge     = podipam.DefaultHistoryMaxAge
	// LeaderElectionID names the Lease the replicas compete for.
	LeaderElectionID = "estuary-manager"
)

// Config configures Run. Validate names each setting by its flag in
// cmd/estuary-manager, so an error points at what the operator must change.
type Config struct {
	// Kube is the API server's client configuration (--kubeconfig).
	Kube *rest.Config
	// MetricsAddr is where /metrics binds (--metrics-bind-address); "0"
	// disables it.
	MetricsAddr string
	// MetricsSecure serves /metrics over HTTPS to callers whose bearer
	// token the API server authenticates (TokenReview) and authorizes for
	// get on the non-resource URL /metrics (SubjectAccessReview); false
	// serves it over plain HTTP to anyone (--metrics-secure).
	MetricsSecure bool
	// MetricsCert, with a Secret, has the manager issue and renew the
	// certificate the components serve /metrics with and serve its own
	// with it (internal/metricscert); empty: a self-signed certificate
	// made at start.
	MetricsCert MetricsCertConfig
	// DaemonSet, as namespace/name, is the daemons' DaemonSet whose status
	// the manager exports as estuary_daemonset_pods (--daemonset;
	// internal/daemonsetmetrics); empty: not exported.
	DaemonSet string
	// ProbeAddr is where /healthz and /readyz bind
	// (--health-probe-bind-address); "0" disables them.
	ProbeAddr string
	// PprofAddr is where Go's profiles are served on /debug/pprof/
	// (--pprof-bind-address); empty or "0": not served.
	PprofAddr string
	// LeaderElect makes one replica allocate at a time (--leader-elect).
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease; empty: the pod's namespace
	// (--leader-election-namespace).
	LeaderElectionNamespace string
	// Workers is how many pods are served in parallel (--workers).
	Workers int
	// MaxRetainTTL is the longest ip-retain-ttl a pod may ask for, applied
	// by the webhook and again before allocation (--max-retain-ttl); 0:
	// DefaultMaxRetainTTL.
	MaxRetainTTL time.Duration
	// AddressHistory records every address's moves in IPHistories
	// (--address-history), at most AddressHistoryMaxEntries per address
	// (--address-history-max-entries) for AddressHistoryMaxAge
	// (--address-history-max-age; 0: podipam's defaults).
	AddressHistory           bool
	AddressHistoryMaxEntries int
	AddressHistoryMaxAge     time.Duration
	// DefaultNetworkType, DefaultIPFamily and DefaultIPRetain are the
	// cluster's defaults for pods that do not say, applied by the webhook
	// and the allocator alike (--default-network-type: Overlay or
	// Underlay; --default-ip-family: IPv4, IPv6, DualStack or Network;
	// --default-ip-retain: true or false, a StatefulSet's pods); empty:
	// DefaultNetworkType, DefaultIPFamily, DefaultIPRetain. See
	// PodDefaults.
	DefaultNetworkType, DefaultIPFamily, DefaultIPRetain string
	// Webhook configures the admission webhook; Port 0 disables it.
	Webhook WebhookConfig
	// UpgradeCRDs brings estuary's CRDs (and the ClusterNetworkPolicy CRD
	// estuary's chart installed) to the manager's schema before the
	// controllers start (--upgrade-crds; internal/crdupgrade).
	UpgradeCRDs bool
	// PolicyStatus reports the policy objects the nodes cannot enforce as
	// written: Events on NetworkPolicies, the Accepted condition of
	// ClusterNetworkPolicies and of v1alpha1 AdminNetworkPolicies and
	// BaselineAdminNetworkPolicies (--policy-status;
	// internal/controller/policystatus). Off where the daemons enforce no
	// policy.
	PolicyStatus bool
	// BootstrapDir holds YAML objects the leader creates when absent, once
	// the webhook serves (--bootstrap-dir); empty: none.
	BootstrapDir string
	// BootstrapOwner is a cluster-scoped object, <kind>.<group>/<name>, that
	// owns every bootstrap object created (--bootstrap-owner); empty: none.
	BootstrapOwner string
	// PodLabelSelector selects the pods the manager gives addresses to and
	// the pod webhooks act on (--pod-label-selector, labels.Parse syntax);
	// empty: every pod. See client.go.
	PodLabelSelector string
	// WorkloadKinds are controller kinds, besides those estuary knows,
	// whose pods have the controller for their workload: a JSON list of
	// {group, version, kind, ordinal} (--workload-kinds; see
	// internal/workload's Configure); empty: none.
	WorkloadKinds string
	// KubeClientQPS and KubeClientBurst rate-limit every API client of the
	// manager (--kube-client-qps, --kube-client-burst); 0:
	// kubeclient.DefaultQPS, kubeclient.DefaultBurst.
	KubeClientQPS   float32
	KubeClientBurst int
}

// WebhookConfig configures the admission webhook's server and certificate.
type WebhookConfig struct {
	// Port the webhook serves on (--webhook-port); 0 disables it.
	Port int
	// CertDir holds tls.crt and tls.key (--webhook-cert-dir); empty:
	// controller-runtime's default.
	CertDir string
	// Secret, as namespace/name, is where a rotator creates and renews the
	// certificate, mounted at CertDir (--webhook-cert-secret); empty: the
	// certificate in CertDir is provided.
	Secret string
	// Service is the webhook's Service, named in the certificate
	// (--webhook-service).
	Service string
	// Configuration names the validating and mutating webhook
	// configurations the CA is injected into (--webhook-configuration).
	Configuration string
}

// MetricsCertConfig configures the metrics serving certificate.
type MetricsCertConfig struct {
	// Secret, as namespace/name, holds the CA and the certificate the
	// rotator keeps (--metrics-cert-secret); empty: no rotation.
	Secret string
	// DNSNames the certificate is valid for (--metrics-cert-dns-names).
	DNSNames []string
	// CertDir is where Secret is mounted (--metrics-cert-dir).
	CertDir string
	// CAConfigMap, in Secret's namespace, receives the CA as ca.crt
	// (--metrics-ca-configmap).
	CAConfigMap string
}

// Validate checks the settings, naming each bad one by its flag.
func (c Config) Validate() error {
	var errs []error
	if c.Kube == nil {
		errs = append(errs, errors.New("--kubeconfig: no API server configuration"))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers=%d: must be at least 1", c.Workers))
	}
	if c.MaxRetainTTL < 0 {
		errs = append(errs, fmt.Errorf("--max-retain-ttl=%s: must be a positive duration (0: %s)", c.MaxRetainTTL, DefaultMaxRetainTTL))
	}
	if c.AddressHistoryMaxEntries < 0 || c.AddressHistoryMaxEntries > 1000 {
		errs = append(errs, fmt.Errorf("--address-history-max-entries=%d: must be 1 to 1000 (0: the default)", c.AddressHistoryMaxEntries))
	}
	if c.AddressHistoryMaxAge < 0 {
		errs = append(errs, fmt.Errorf("--address-history-max-age=%s: must be a positive duration (0: the default)", c.AddressHistoryMaxAge))
	}
	if c.Webhook.Port < 0 || c.Webhook.Port > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port=%d: must be 0 (off) or a port number", c.Webhook.Port))
	}
	if c.Webhook.Secret != "" {
		if _, err := c.Webhook.secretName(); err != nil {
			errs = append(errs, err)
		}
		if c.Webhook.Port == 0 {
			errs = append(errs, fmt.Errorf("--webhook-cert-secret=%q: needs --webhook-port", c.Webhook.Secret))
		}
	}
	if _, err := c.PodDefaults(); err != nil {
		errs = append(errs, err)
	}
	if c.BootstrapOwner != "" && c.BootstrapDir == "" {
		errs = append(errs, fmt.Errorf("--bootstrap-owner=%q: needs --bootstrap-dir", c.BootstrapOwner))
	}
	if _, err := c.workloadKinds(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateClient()...)
	errs = append(errs, c.validateMetrics()...)
	return errors.Join(errs...)
}

// withDefaults fills the settings left empty.
func (c Config) withDefaults() Config {
	if c.MaxRetainTTL == 0 {
		c.MaxRetainTTL = DefaultMaxRetainTTL
	}
	if c.Webhook.Service == "" {
		c.Webhook.Service = DefaultWebhookService
	}
	if c.Webhook.Configuration == "" {
		c.Webhook.Configuration = webhook.ConfigurationName
	}
	if c.KubeClientQPS == 0 {
		c.KubeClientQPS = kubeclient.DefaultQPS
	}
	if c.KubeClientBurst == 0 {
		c.KubeClientBurst = kubeclient.DefaultBurst
	}
	return c
}

// workloadKinds parses WorkloadKinds.
func (c Config) workloadKinds() ([]workload.Kind, error) {
	kinds, err := workload.ParseKinds(c.WorkloadKinds)
	if err != nil {
		return nil, fmt.Errorf("--workload-kinds: %w", err)
	}
	return kinds, nil
}

// secretName parses Secret as namespace/name.
func (w WebhookConfig) secretName() (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(w.Secret, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("--webhook-cert-secret=%q: want namespace/name", w.Secret)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
