package manager

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/crdupgrade"
	"github.com/estuary-cni/estuary/internal/version"
)

// ReasonCRDUpgradeFailed is the reason of the Warning Event recorded on a
// shared CRD (network-policy-api's) the manager could not upgrade.
const ReasonCRDUpgradeFailed = "CRDUpgradeFailed"

// eventController is the reporting controller of the manager's Events.
const eventController = "estuary-manager"

// crdUpgradeFailed is 1 for a shared CRD whose upgrade failed at this
// replica's start, 0 once one succeeded or left it alone.
var crdUpgradeFailed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "estuary_manager_crd_upgrade_failed",
	Help: "1 when this replica could not bring a network-policy-api CRD estuary's chart installed to its schema " +
		"(the CRD is left as it was and the manager runs on; the log and a CRDUpgradeFailed Event say why), else 0.",
}, []string{"crd"})

func init() { ctrlmetrics.Registry.MustRegister(crdUpgradeFailed) }

// upgradeCRDs brings the cluster's estuary CRDs, and the ClusterNetworkPolicy
// CRD when estuary's chart installed it, to the manager's schema. Only a
// failure on estuary's own CRDs is returned; one on a shared CRD is
// reported (reportShared) and the manager goes on.
func upgradeCRDs(ctx context.Context, kube *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("upgrade CRDs: %w", err)
	}
	if err := eventsv1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("upgrade CRDs: %w", err)
	}
	c, err := client.New(kube, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("upgrade CRDs: %w", err)
	}
	want, err := crdupgrade.Embedded()
	if err != nil {
		return fmt.Errorf("upgrade CRDs: %w", err)
	}
	results, err := crdupgrade.Ensure(ctx, c, want, version.Version)
	for _, r := range results {
		log.Info("CRD", "name", r.Name, "action", r.Action, "writtenBy", r.Release, "reason", r.Reason, "release", version.Version)
	}
	if err != nil {
		return fmt.Errorf("upgrade CRDs (--upgrade-crds): %w", err)
	}
	policy, err := crdupgrade.EmbeddedPolicy()
	if err != nil {
		return fmt.Errorf("upgrade CRDs: %w", err)
	}
	for _, r := range crdupgrade.EnsureOwned(ctx, c, policy, version.Version) {
		reportShared(ctx, c, r)
	}
	return nil
}

// reportShared logs what EnsureOwned did to a shared CRD and, when it
// failed, records a Warning Event on the CRD and sets crdUpgradeFailed.
func reportShared(ctx context.Context, c client.Client, r crdupgrade.Result) {
	failed := 0.0
	switch r.Action {
	case crdupgrade.Foreign:
		log.Info("CRD not installed by estuary (no "+crdupgrade.AnnotationPolicyAPI+" annotation): left as it is",
			"name", r.Name, "action", r.Action)
	case crdupgrade.Absent:
		log.Info("CRD not installed (the chart's crds/ skipped?): nothing to upgrade", "name", r.Name, "action", r.Action)
	case crdupgrade.Failed:
		failed = 1
		log.Error(r.Err, "could not upgrade a CRD estuary shares with others: left as it is, the manager goes on",
			"name", r.Name, "action", r.Action, "writtenBy", r.Release, "release", version.Version)
		if err := recordCRDEvent(ctx, c, r.Name, fmt.Sprintf("estuary-manager %s could not upgrade the CRD; "+
			"it is left as it was: %v", version.Version, r.Err)); err != nil {
			log.Error(err, "record the CRD upgrade failure as an Event", "name", r.Name)
		}
	default:
		log.Info("CRD", "name", r.Name, "action", r.Action, "writtenBy", r.Release, "reason", r.Reason, "release", version.Version)
	}
	crdUpgradeFailed.WithLabelValues(r.Name).Set(failed)
}

// recordCRDEvent records a Warning Event CRDUpgradeFailed regarding the
// cluster-scoped CRD name, in the default namespace as Kubernetes does for
// cluster-scoped objects (`kubectl describe crd NAME` shows it).
func recordCRDEvent(ctx context.Context, c client.Client, name, note string) error {
	ref := corev1.ObjectReference{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: name}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err == nil {
		ref.UID, ref.ResourceVersion = crd.UID, crd.ResourceVersion
	}
	if len(note) > 1000 {
		note = note[:1000]
	}
	instance, _ := os.Hostname() // the pod's name, or with hostNetwork its node's
	if instance == "" {
		instance = eventController
	}
	now := time.Now()
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: fmt.Sprintf("%s.%x", name, now.UnixNano())},
		EventTime:  metav1.NewMicroTime(now), ReportingController: eventController, ReportingInstance: instance,
		Action: "UpgradeCRD", Reason: ReasonCRDUpgradeFailed, Regarding: ref, Note: note, Type: corev1.EventTypeWarning,
	}
	if err := c.Create(ctx, ev); err != nil {
		return fmt.Errorf("create Event on CRD %s: %w", name, err)
	}
	return nil
}

// historyServed reports whether the API server serves IPHistory. A cluster
// upgraded with `helm upgrade` from a release without address history lacks
// its CRD (Helm installs no new CRD on an upgrade): the manager then runs
// with history off and says how to turn it on.
func historyServed(m meta.RESTMapper) bool {
	_, err := m.RESTMapping(schema.GroupKind{Group: estuaryv1.GroupVersion.Group, Kind: "IPHistory"}, estuaryv1.GroupVersion.Version)
	if err == nil {
		return true
	}
	log.Error(err, "address history is off: the API server does not serve IPHistory; "+
		"apply the chart's crds/ (kubectl apply -f charts/estuary/crds/) and restart the manager to turn it on",
		"crd", "iphistories.networking.estuary.io")
	return false
}
