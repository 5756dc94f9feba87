package manager

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/crdupgrade"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

const cnpCRD = "clusternetworkpolicies.policy.networking.k8s.io"

// TestUpgradeCRDsGoesOnWhenASharedCRDIsRefused: when the API server refuses
// the update of the ClusterNetworkPolicy CRD (here an admission policy
// freezes it), the manager's CRD upgrade still succeeds, leaves the CRD as
// it was, and reports the refusal: a Warning Event CRDUpgradeFailed on the
// CRD and estuary_manager_crd_upgrade_failed at 1, back to 0 once an
// upgrade goes through. (Run returns upgradeCRDs' error and nothing else
// of it; Run itself can start once per process, see
// TestRunLeadsAllocatesAndStops.)
func TestUpgradeCRDsGoesOnWhenASharedCRDIsRefused(t *testing.T) {
	crds := crdClient(t)
	var cnp apiextensionsv1.CustomResourceDefinition
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := crds.Get(bg(), client.ObjectKey{Name: cnpCRD}, &cnp); err != nil {
			return err
		}
		if cnp.Annotations[crdupgrade.AnnotationPolicyAPI] == "" {
			t.Fatalf("envtest's %s lacks %s: the test needs the chart's copy", cnpCRD, crdupgrade.AnnotationPolicyAPI)
		}
		cnp.Annotations[crdupgrade.AnnotationSpecHash] = "previous" // an older schema: an update is due
		return crds.Update(bg(), &cnp)
	})
	if err != nil {
		t.Fatal(err)
	}
	freezeCRD(t, crds, cnpCRD)

	if err := upgradeCRDs(bg(), kube); err != nil {
		t.Fatalf("upgradeCRDs with %s refused: %v; want the manager to go on", cnpCRD, err)
	}
	var after apiextensionsv1.CustomResourceDefinition
	if err := crds.Get(bg(), client.ObjectKey{Name: cnpCRD}, &after); err != nil {
		t.Fatal(err)
	}
	if h := after.Annotations[crdupgrade.AnnotationSpecHash]; h != "previous" {
		t.Fatalf("%s was written although its update was refused (spec hash %q)", cnpCRD, h)
	}
	if got := testutil.ToFloat64(crdUpgradeFailed.WithLabelValues(cnpCRD)); got != 1 {
		t.Errorf("estuary_manager_crd_upgrade_failed{crd=%q} = %v, want 1", cnpCRD, got)
	}
	var events eventsv1.EventList
	if err := k8s.List(bg(), &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		if e.Regarding.Name == cnpCRD && e.Regarding.UID == cnp.UID && e.Reason == ReasonCRDUpgradeFailed && e.Type == "Warning" &&
			strings.Contains(e.Note, "frozen by the test") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no Warning Event %s on %s naming the refusal among %d events", ReasonCRDUpgradeFailed, cnpCRD, len(events.Items))
	}

	unfreezeCRD(t, crds, cnpCRD)
	if err := upgradeCRDs(bg(), kube); err != nil {
		t.Fatal(err)
	}
	if err := crds.Get(bg(), client.ObjectKey{Name: cnpCRD}, &after); err != nil {
		t.Fatal(err)
	}
	if h := after.Annotations[crdupgrade.AnnotationSpecHash]; h == "previous" {
		t.Fatalf("%s was not upgraded once its updates were admitted", cnpCRD)
	}
	if got := testutil.ToFloat64(crdUpgradeFailed.WithLabelValues(cnpCRD)); got != 0 {
		t.Errorf("estuary_manager_crd_upgrade_failed{crd=%q} = %v after a successful upgrade, want 0", cnpCRD, got)
	}
}

func crdClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(kube, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const freezeName = "test-freeze-crd"

// freezeCRD installs an admission policy refusing every update of the CRD
// name and waits until the API server enforces it.
func freezeCRD(t *testing.T, crds client.Client, name string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: freezeName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				ResourceNames: []string{name},
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"apiextensions.k8s.io"}, APIVersions: []string{"v1"},
						Resources: []string{"customresourcedefinitions"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "CRD updates are frozen by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: freezeName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: freezeName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(bg(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { unfreezeCRD(t, crds, name) })
	testenv.Eventually(t, "the API server refuses updates of "+name, 30*time.Second, func() error {
		err := dryRunUpdate(crds, name)
		switch {
		case err == nil:
			return errors.New("a dry-run update was admitted")
		case !strings.Contains(err.Error(), "frozen by the test"):
			return fmt.Errorf("refused for another reason: %w", err)
		}
		return nil
	})
}

// unfreezeCRD removes freezeCRD's policy and waits until an update of name
// is admitted again.
func unfreezeCRD(t *testing.T, crds client.Client, name string) {
	t.Helper()
	for _, o := range []client.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: freezeName}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: freezeName}},
	} {
		if err := k8s.Delete(bg(), o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the API server admits updates of "+name, 30*time.Second, func() error {
		return dryRunUpdate(crds, name)
	})
}

func dryRunUpdate(crds client.Client, name string) error {
	var c apiextensionsv1.CustomResourceDefinition
	if err := crds.Get(bg(), client.ObjectKey{Name: name}, &c); err != nil {
		return err
	}
	return crds.Update(bg(), &c, client.DryRunAll)
}
