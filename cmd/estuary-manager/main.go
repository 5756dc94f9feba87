// Command estuary-manager runs estuary's cluster-wide controllers: pod
// address allocation and release, StatefulSet address retention, Subnet
// and Network status, and Node labels naming each node's networks and their
// free capacity. One replica leads at a time (a Lease); the others wait.
// With --webhook-port it also serves the admission webhook, on every replica.
// With --bootstrap-dir the leader creates the objects in that directory
// (the release's default Network and Subnets) that do not exist yet, once
// its webhook serves (see internal/bootstrap). The work is internal/manager's
// Run; this command turns flags into its Config. --version prints the
// version and exits. `estuary-manager uninstall-nodes` instead asks every
// daemon to take estuary off its node and waits for their answers
// (package internal/uninstall): the chart's pre-delete hook runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/estuary-cni/estuary/internal/clientgates"
	"github.com/estuary-cni/estuary/internal/kubeclient"
	"github.com/estuary-cni/estuary/internal/manager"
	"github.com/estuary-cni/estuary/internal/memlimit"
	"github.com/estuary-cni/estuary/internal/version"
	"github.com/estuary-cni/estuary/internal/webhook"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == uninstallNodesCommand {
		os.Exit(uninstallNodesMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	var (
		cfg     manager.Config
		zapOpts = zap.Options{}
	)
	flag.StringVar(&cfg.MetricsAddr, "metrics-bind-address", manager.DefaultMetricsAddr, "address the metrics endpoint binds to (\"0\" disables it)")
	flag.BoolVar(&cfg.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS (the certificate of --metrics-cert-secret, else a self-signed one) to callers whose bearer token the API server authenticates and authorizes for get on the non-resource URL /metrics (TokenReview, SubjectAccessReview); false serves plain HTTP to anyone")
	flag.StringVar(&cfg.MetricsCert.Secret, "metrics-cert-secret", "", "namespace/name of an existing Secret in which to create and rotate a CA and the certificate the manager and the daemons serve /metrics with; it must be mounted at --metrics-cert-dir. Empty: a self-signed certificate made at start")
	flag.StringVar(&cfg.MetricsCert.CertDir, "metrics-cert-dir", "", "directory --metrics-cert-secret is mounted at")
	flag.Func("metrics-cert-dns-names", "comma-separated DNS names of the metrics certificate, e.g. the metrics Services' <name>.<namespace>.svc", func(v string) error {
		cfg.MetricsCert.DNSNames = strings.Split(v, ",")
		return nil
	})
	flag.StringVar(&cfg.MetricsCert.CAConfigMap, "metrics-ca-configmap", "", "existing ConfigMap, in the namespace of --metrics-cert-secret, where the metrics CA is published as ca.crt")
	flag.StringVar(&cfg.DaemonSet, "daemonset", "", "namespace/name of the daemons' DaemonSet, whose status is exported as estuary_daemonset_pods; empty: not exported")
	flag.StringVar(&cfg.PprofAddr, "pprof-bind-address", "", "address Go's profiles (/debug/pprof/) are served on, without authentication: keep it on loopback (empty or \"0\": not served)")
	flag.StringVar(&cfg.ProbeAddr, "health-probe-bind-address", manager.DefaultProbeAddr, "address the health probes bind to")
	flag.BoolVar(&cfg.LeaderElect, "leader-elect", true, "elect a leader so that one replica allocates at a time")
	flag.StringVar(&cfg.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader Lease (default: the pod's)")
	flag.IntVar(&cfg.Workers, "workers", manager.DefaultWorkers, "pods served in parallel")
	flag.DurationVar(&cfg.MaxRetainTTL, "max-retain-ttl", manager.DefaultMaxRetainTTL, "longest networking.estuary.io/ip-retain-ttl a pod (or its namespace default) may ask for; the webhook denies, and the manager refuses, a longer one (0: the default)")
	flag.BoolVar(&cfg.AddressHistory, "address-history", true, "record who held each address and when (allocations, hand-overs, keeps and releases) in IPHistory objects, read by kubectl estuary get ip ADDR --history; never read by allocation")
	flag.IntVar(&cfg.AddressHistoryMaxEntries, "address-history-max-entries", manager.DefaultAddressHistoryMaxEntries, "most history entries kept per address (1 to 1000)")
	flag.DurationVar(&cfg.AddressHistoryMaxAge, "address-history-max-age", manager.DefaultAddressHistoryMaxAge, "how long a history entry is kept")
	flag.StringVar(&cfg.DefaultNetworkType, "default-network-type", manager.DefaultNetworkType, "network type of a pod that names no network, subnet or type, nor does its namespace: Overlay, or Underlay (the Underlay network of the node it is scheduled to, among the domains with free addresses)")
	flag.StringVar(&cfg.DefaultIPFamily, "default-ip-family", manager.DefaultIPFamily, "IP family of a pod that names no family and no subnet, nor does its namespace: IPv4, IPv6, DualStack, or Network (every family its network has a public subnet of)")
	flag.StringVar(&cfg.DefaultIPRetain, "default-ip-retain", manager.DefaultIPRetain, "whether a StatefulSet's pod whose template sets no networking.estuary.io/ip-retain keeps its addresses for the pod of the same ordinal: true or false")
	flag.IntVar(&cfg.Webhook.Port, "webhook-port", 0, "port the admission webhook serves on; 0 disables the webhook")
	flag.StringVar(&cfg.Webhook.CertDir, "webhook-cert-dir", "", "directory holding the webhook's tls.crt and tls.key (default: controller-runtime's)")
	flag.StringVar(&cfg.Webhook.Secret, "webhook-cert-secret", "", "namespace/name of an existing Secret in which to create and rotate the webhook's certificate; it must be mounted at --webhook-cert-dir (required with it). Empty: the certificate in --webhook-cert-dir is provided")
	flag.StringVar(&cfg.Webhook.Service, "webhook-service", manager.DefaultWebhookService, "the webhook's Service, in the namespace of --webhook-cert-secret, named in its certificate")
	flag.StringVar(&cfg.Webhook.Configuration, "webhook-configuration", webhook.ConfigurationName, "name of the validating and mutating webhook configurations the CA is injected into")
	flag.BoolVar(&cfg.PolicyStatus, "policy-status", true, "report the policy objects the nodes cannot enforce as written: a Warning Event on each such NetworkPolicy, the Accepted condition of ClusterNetworkPolicies (and v1alpha1 AdminNetworkPolicies and BaselineAdminNetworkPolicies when served); false where the daemons enforce no policy")
	flag.BoolVar(&cfg.UpgradeCRDs, "upgrade-crds", true, "at start, bring estuary's four CRDs, and the ClusterNetworkPolicy CRD when it carries estuary's networking.estuary.io/policy-api annotation, to this manager's schema (never a newer release's down; never creating one)")
	flag.StringVar(&cfg.BootstrapDir, "bootstrap-dir", "", "directory of YAML objects the leader creates when absent, never updating existing ones (after the webhook serves); empty: none")
	flag.StringVar(&cfg.BootstrapOwner, "bootstrap-owner", "", "cluster-scoped object, <kind>.<group>/<name>, that owns every bootstrap object created, so deleting it deletes them; empty: none")
	flag.StringVar(&cfg.WorkloadKinds, "workload-kinds", "", `controller kinds whose pods have the controller for their workload (addresses kept for its next pod), as a JSON list of {"group", "version", "kind", "ordinal"}; ordinal: true keeps each pod's addresses for the pod of the same name <owner>-<n>, as a StatefulSet's`)
	flag.StringVar(&cfg.PodLabelSelector, "pod-label-selector", "", "label selector (kubectl's syntax, e.g. \"networking.example.com/cni=estuary\") of the pods estuary serves: the manager gives no address to another pod and the pod webhooks skip it; empty: every pod")
	kubeclient.BindFlags(flag.CommandLine, &cfg.KubeClientQPS, &cfg.KubeClientBurst, "manager")
	applyFaults := bindFaultFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the version and exit")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Line("estuary-manager"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	log.Info("estuary-manager", "version", version.Version, "commit", version.GitCommit, "buildDate", version.BuildDate)
	memlimit.Apply(log)
	clientgates.Apply(log)

	kube, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "load kubeconfig")
		os.Exit(1)
	}
	applyFaults(log, kube)
	cfg.Kube = kube
	if err := manager.Run(ctrl.SetupSignalHandler(), cfg); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
