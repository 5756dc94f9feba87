package crdupgrade

import (
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyUpstream applies, as kubectl apply --server-side would, an upstream
// network-policy-api bundle of the ClusterNetworkPolicy CRD at bundle: the
// embedded spec with an extra printer column, upstream's annotations only
// (estuary's stay, as apply leaves fields it does not name).
func applyUpstream(t *testing.T, want apiextensionsv1.CustomResourceDefinition, bundle string) {
	t.Helper()
	up := want.DeepCopy()
	up.APIVersion, up.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	up.Annotations = map[string]string{AnnotationBundleVersion: bundle, "policy.networking.k8s.io/channel": "standard",
		"api-approved.kubernetes.io": want.Annotations["api-approved.kubernetes.io"]}
	for i := range up.Spec.Versions {
		up.Spec.Versions[i].AdditionalPrinterColumns = append(up.Spec.Versions[i].AdditionalPrinterColumns,
			apiextensionsv1.CustomResourceColumnDefinition{Name: "Upstream", Type: "string", JSONPath: ".spec.subject"})
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(up)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if err := k8s.Apply(bg(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
		t.Fatalf("apply upstream %s %s: %v", cnp, bundle, err)
	}
}

func hasColumn(c apiextensionsv1.CustomResourceDefinition, name string) bool {
	for _, v := range c.Spec.Versions {
		for _, col := range v.AdditionalPrinterColumns {
			if col.Name == name {
				return true
			}
		}
	}
	return false
}

// TestEnsureOwnedKeepsANewerUpstreamBundle: an upstream bundle applied over
// the chart's copy raises bundle-version and keeps estuary's annotations,
// which still name an older release and network-policy-api; the manager
// keeps it (KeptNewer, naming bundle-version) and writes nothing. A
// bundle-version that is not a semantic version is kept too.
func TestEnsureOwnedKeepsANewerUpstreamBundle(t *testing.T) {
	want := embeddedPolicy(t)
	t.Cleanup(func() { resetPolicy(t, want) })
	for _, bundle := range []string{"v0.9.0", "main-snapshot"} {
		oldenPolicy(t, "0.1.0", func(a map[string]string) {
			a[AnnotationPolicyAPI] = want[0].Annotations[AnnotationPolicyAPI]
			a[bundleVersion] = want[0].Annotations[bundleVersion]
		})
		applyUpstream(t, want[0], bundle)
		before := get(t, cnp)
		if before.Annotations[AnnotationRelease] != "0.1.0" || before.Annotations[AnnotationPolicyAPI] == "" {
			t.Fatalf("apply did not keep estuary's annotations: %v", before.Annotations)
		}
		rs := ensureOwned(t, want, "0.2.0")
		if r := rs[0]; r.Action != KeptNewer || !strings.Contains(r.Reason, AnnotationBundleVersion) {
			t.Fatalf("bundle %s: EnsureOwned = %s (%s), want %s naming %s", bundle, r.Action, r.Reason, KeptNewer, AnnotationBundleVersion)
		}
		after := get(t, cnp)
		if after.ResourceVersion != before.ResourceVersion || !hasColumn(after, "Upstream") || after.Annotations[bundleVersion] != bundle {
			t.Fatalf("bundle %s: the upstream CRD was written: resourceVersion %s -> %s, bundle-version %q",
				bundle, before.ResourceVersion, after.ResourceVersion, after.Annotations[bundleVersion])
		}
	}
}

// TestEnsureOwnedKeepsACRDWithAnotherVersion: a ClusterNetworkPolicy CRD
// serving a version the embedded copy lacks, or still storing objects in
// one (status.storedVersions; the API server refuses an update that drops
// it), is kept, whatever its bundle-version says.
func TestEnsureOwnedKeepsACRDWithAnotherVersion(t *testing.T) {
	want := embeddedPolicy(t)
	t.Cleanup(func() { resetPolicy(t, want) })
	oldenPolicy(t, "0.1.0", func(a map[string]string) { a[bundleVersion] = "v0.1.0" })
	c := get(t, cnp)
	extra := *c.Spec.Versions[len(c.Spec.Versions)-1].DeepCopy()
	extra.Name, extra.Served, extra.Storage = "v1", true, true
	for i := range c.Spec.Versions {
		c.Spec.Versions[i].Storage = false
	}
	c.Spec.Versions = append(c.Spec.Versions, extra)
	if err := k8s.Update(bg(), &c); err != nil {
		t.Fatal(err)
	}
	served := get(t, cnp)
	if r := ensureOwned(t, want, "0.2.0")[0]; r.Action != KeptNewer || !strings.Contains(r.Reason, "serves version v1") {
		t.Fatalf("a CRD serving v1: EnsureOwned = %s (%s), want %s", r.Action, r.Reason, KeptNewer)
	}
	// v1 no longer served, but objects were stored in it.
	n := len(served.Spec.Versions)
	served.Spec.Versions[n-1].Served, served.Spec.Versions[n-1].Storage = false, false
	served.Spec.Versions[n-2].Storage = true
	if err := k8s.Update(bg(), &served); err != nil {
		t.Fatal(err)
	}
	stored := get(t, cnp)
	if !slices.Contains(stored.Status.StoredVersions, "v1") {
		t.Fatalf("storedVersions %v lack v1", stored.Status.StoredVersions)
	}
	if r := ensureOwned(t, want, "0.2.0")[0]; r.Action != KeptNewer || !strings.Contains(r.Reason, "stored in version v1") {
		t.Fatalf("a CRD storing v1: EnsureOwned = %s (%s), want %s", r.Action, r.Reason, KeptNewer)
	}
	if got := get(t, cnp); got.ResourceVersion != stored.ResourceVersion {
		t.Fatalf("a CRD storing v1 was written")
	}
}

// TestEnsureOwnedReportsARefusedUpdate: an update of a policy CRD the API
// server refuses is a Failed result carrying the refusal, not an error;
// the CRD is left as it was and the next CRD is still looked at.
func TestEnsureOwnedReportsARefusedUpdate(t *testing.T) {
	want := embeddedPolicy(t)
	t.Cleanup(func() { resetPolicy(t, want) })
	before := oldenPolicy(t, "0.1.0", func(a map[string]string) { a[bundleVersion] = want[0].Annotations[bundleVersion] })
	refused := want[0].DeepCopy()
	for i := range refused.Spec.Versions {
		refused.Spec.Versions[i].Storage = true // two storage versions: invalid
	}
	missing := want[0].DeepCopy()
	missing.Name = "clusterwidgetpolicies.policy.networking.k8s.io"
	rs := EnsureOwned(bg(), k8s, []apiextensionsv1.CustomResourceDefinition{*refused, *missing}, "0.2.0")
	if len(rs) != 2 {
		t.Fatalf("EnsureOwned = %v, want a result per CRD", rs)
	}
	if r := rs[0]; r.Action != Failed || r.Err == nil || !strings.Contains(r.Err.Error(), "update CRD "+cnp) {
		t.Fatalf("refused update: %s (%v), want %s with the API server's refusal", r.Action, r.Err, Failed)
	}
	if rs[1].Action != Absent {
		t.Fatalf("the CRD after a failed one: %s, want %s", rs[1].Action, Absent)
	}
	if got := get(t, cnp); got.ResourceVersion != before.ResourceVersion {
		t.Fatalf("%s was written by a refused update", cnp)
	}
}

// resetPolicy brings the ClusterNetworkPolicy CRD back to the embedded
// copy (versions, storedVersions and annotations), for the tests that
// follow.
func resetPolicy(t *testing.T, want []apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	c := get(t, cnp)
	var keep []string
	for _, v := range c.Status.StoredVersions {
		if slices.ContainsFunc(want[0].Spec.Versions, func(w apiextensionsv1.CustomResourceDefinitionVersion) bool { return w.Name == v }) {
			keep = append(keep, v)
		}
	}
	if len(keep) != len(c.Status.StoredVersions) {
		c.Status.StoredVersions = keep
		if err := k8s.Status().Update(bg(), &c); err != nil {
			t.Fatalf("reset storedVersions: %v", err)
		}
		c = get(t, cnp)
	}
	c.Spec = want[0].Spec
	c.Annotations = want[0].DeepCopy().Annotations
	if err := k8s.Update(bg(), &c); err != nil {
		t.Fatalf("reset %s: %v", cnp, err)
	}
	restorePolicy(t, want)
}
