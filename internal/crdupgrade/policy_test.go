package crdupgrade

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	cnp           = "clusternetworkpolicies.policy.networking.k8s.io"
	bundleVersion = AnnotationBundleVersion
)

func embeddedPolicy(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	want, err := EmbeddedPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 1 || want[0].Name != cnp {
		t.Fatalf("embedded policy CRDs = %v, want %s alone", want, cnp)
	}
	return want
}

// oldenPolicy makes the installed ClusterNetworkPolicy CRD look like an
// older install: no printer columns, the bundle-version annotation of an
// older network-policy-api, written by release; set then adjusts the
// annotations further (estuary's policy-api annotation, for one).
func oldenPolicy(t *testing.T, release string, set func(map[string]string)) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var c apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(bg(), client.ObjectKey{Name: cnp}, &c); err != nil {
		t.Fatal(err)
	}
	for i := range c.Spec.Versions {
		c.Spec.Versions[i].AdditionalPrinterColumns = nil
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnotationRelease] = release
	c.Annotations[AnnotationSpecHash] = "previous"
	c.Annotations[AnnotationPolicyAPI] = "sigs.k8s.io/network-policy-api@v0.2.0"
	c.Annotations[bundleVersion] = "v0.2.0"
	set(c.Annotations)
	if err := k8s.Update(bg(), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func columns(c apiextensionsv1.CustomResourceDefinition) int {
	n := 0
	for _, v := range c.Spec.Versions {
		n += len(v.AdditionalPrinterColumns)
	}
	return n
}

// TestEnsureOwnedUpgradesEstuarysPolicyCRD: a ClusterNetworkPolicy CRD
// carrying estuary's annotation, of an older schema, gets the embedded spec
// (its printer columns) and annotations (upstream's bundle-version, which
// the conformance suite reads, and estuary's policy-api); a second
// EnsureOwned changes nothing.
func TestEnsureOwnedUpgradesEstuarysPolicyCRD(t *testing.T) {
	want := embeddedPolicy(t)
	oldenPolicy(t, "0.1.0", func(map[string]string) {})
	rs := ensureOwned(t, want, "0.2.0")
	if got := actions(rs)[cnp]; got != Updated {
		t.Fatalf("EnsureOwned on an older %s installed by estuary: %s, want %s (results %v)", cnp, got, Updated, rs)
	}
	c := get(t, cnp)
	if columns(c) == 0 || columns(c) != columns(want[0]) {
		t.Fatalf("%s after the upgrade has %d printer columns, want the embedded %d", cnp, columns(c), columns(want[0]))
	}
	for _, k := range []string{AnnotationPolicyAPI, bundleVersion, "policy.networking.k8s.io/channel"} {
		if c.Annotations[k] != want[0].Annotations[k] || c.Annotations[k] == "" {
			t.Errorf("%s annotation %s = %q after the upgrade, want %q", cnp, k, c.Annotations[k], want[0].Annotations[k])
		}
	}
	if c.Annotations[AnnotationRelease] != "0.2.0" {
		t.Errorf("%s release annotation = %q, want 0.2.0", cnp, c.Annotations[AnnotationRelease])
	}
	if rs = ensureOwned(t, want, "0.2.0"); actions(rs)[cnp] != Current {
		t.Fatalf("a second EnsureOwned: %v; want %s", rs, Current)
	}
}

// TestEnsureOwnedLeavesAForeignPolicyCRD: a ClusterNetworkPolicy CRD
// without estuary's annotation (another plugin's, or the user's) is not
// written at all, whatever its schema.
func TestEnsureOwnedLeavesAForeignPolicyCRD(t *testing.T) {
	want := embeddedPolicy(t)
	before := oldenPolicy(t, "", func(a map[string]string) {
		delete(a, AnnotationPolicyAPI)
		delete(a, AnnotationRelease)
		delete(a, AnnotationSpecHash)
	})
	t.Cleanup(func() { restorePolicy(t, want) })
	rs := ensureOwned(t, want, "0.2.0")
	if got := actions(rs)[cnp]; got != Foreign {
		t.Fatalf("EnsureOwned on a %s estuary did not install: %s, want %s", cnp, got, Foreign)
	}
	c := get(t, cnp)
	if c.ResourceVersion != before.ResourceVersion || columns(c) != 0 || c.Annotations[bundleVersion] != "v0.2.0" {
		t.Fatalf("a foreign %s was written: resourceVersion %s -> %s, %d printer columns, bundle-version %q",
			cnp, before.ResourceVersion, c.ResourceVersion, columns(c), c.Annotations[bundleVersion])
	}
}

// TestEnsureOwnedNeverDowngradesPolicyCRD: estuary's ClusterNetworkPolicy
// CRD written by a newer release, or of a newer network-policy-api, stays
// as it is.
func TestEnsureOwnedNeverDowngradesPolicyCRD(t *testing.T) {
	want := embeddedPolicy(t)
	t.Cleanup(func() { restorePolicy(t, want) })
	for _, c := range []struct {
		name    string
		release string
		set     func(map[string]string)
	}{
		{"newer release", "9.0.0", func(map[string]string) {}},
		{"newer network-policy-api", "0.1.0", func(a map[string]string) {
			a[AnnotationPolicyAPI] = "sigs.k8s.io/network-policy-api@v9.0.0"
		}},
	} {
		before := oldenPolicy(t, c.release, c.set)
		rs := ensureOwned(t, want, "0.2.0")
		if got := actions(rs)[cnp]; got != KeptNewer {
			t.Fatalf("%s: EnsureOwned of release 0.2.0: %s, want %s", c.name, got, KeptNewer)
		}
		if got := get(t, cnp); got.ResourceVersion != before.ResourceVersion {
			t.Fatalf("%s: %s was written by an older manager", c.name, cnp)
		}
	}
}

// TestEnsureOwnedAbsentIsNoError: a ClusterNetworkPolicy CRD that is not
// installed (the chart installed with --skip-crds) is reported, not an
// error, and not created.
func TestEnsureOwnedAbsentIsNoError(t *testing.T) {
	want := embeddedPolicy(t)
	missing := want[0].DeepCopy()
	missing.Name = "clusterwidgetpolicies.policy.networking.k8s.io"
	rs := ensureOwned(t, []apiextensionsv1.CustomResourceDefinition{*missing}, "0.2.0")
	if got := actions(rs)[missing.Name]; got != Absent {
		t.Fatalf("EnsureOwned of an absent CRD: %s, want %s", got, Absent)
	}
	var c apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(bg(), client.ObjectKey{Name: missing.Name}, &c); err == nil {
		t.Fatalf("EnsureOwned created %s", missing.Name)
	}
}

// restorePolicy puts estuary's annotation back on the CRD and brings it to
// the embedded schema, for the tests that follow.
func restorePolicy(t *testing.T, want []apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	oldenPolicy(t, "", func(a map[string]string) { delete(a, AnnotationRelease) })
	if rs := ensureOwned(t, want, "dev"); actions(rs)[cnp] != Updated {
		t.Fatalf("restore %s: %v", cnp, rs)
	}
}

// ensureOwned runs EnsureOwned and fails the test on a Failed result.
func ensureOwned(t *testing.T, want []apiextensionsv1.CustomResourceDefinition, release string) []Result {
	t.Helper()
	rs := EnsureOwned(bg(), k8s, want, release)
	for _, r := range rs {
		if r.Action == Failed {
			t.Fatalf("EnsureOwned of %s failed: %v", r.Name, r.Err)
		}
	}
	return rs
}
