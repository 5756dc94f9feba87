package crdupgrade

import (
	"context"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(cfg *rest.Config, _ client.Client) (func(), error) {
		scheme := runtime.NewScheme()
		if err := apiextensionsv1.AddToScheme(scheme); err != nil {
			return nil, err
		}
		var err error
		k8s, err = client.New(cfg, client.Options{Scheme: scheme})
		return nil, err
	}))
}

func bg() context.Context { return context.Background() }

// olden makes the installed CRD name look like a previous release's: no
// printer columns or categories, written by release.
func olden(t *testing.T, name, release string) {
	t.Helper()
	var c apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	c.Spec.Names.Categories = nil
	for i := range c.Spec.Versions {
		c.Spec.Versions[i].AdditionalPrinterColumns = nil
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnotationRelease] = release
	c.Annotations[AnnotationSpecHash] = "previous"
	if err := k8s.Update(bg(), &c); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, name string) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var c apiextensionsv1.CustomResourceDefinition
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func actions(rs []Result) map[string]Action {
	m := map[string]Action{}
	for _, r := range rs {
		m[r.Name] = r.Action
	}
	return m
}

// TestEnsureUpgradesAnOlderSchemaOnce: a CRD of an older release gets the
// manager's spec back (its categories and columns) and the manager's
// annotations; a second Ensure changes nothing.
func TestEnsureUpgradesAnOlderSchemaOnce(t *testing.T) {
	want, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	const subnets = "subnets.networking.estuary.io"
	olden(t, subnets, "0.1.0")
	rs, err := Ensure(bg(), k8s, want, "0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(rs)[subnets]; got != Updated {
		t.Fatalf("Ensure on an older %s: %s, want %s (results %v)", subnets, got, Updated, rs)
	}
	c := get(t, subnets)
	if len(c.Spec.Names.Categories) == 0 || len(c.Spec.Versions[0].AdditionalPrinterColumns) == 0 {
		t.Fatalf("%s after the upgrade has categories %v and columns %v; want the manager's", subnets,
			c.Spec.Names.Categories, c.Spec.Versions[0].AdditionalPrinterColumns)
	}
	if c.Annotations[AnnotationRelease] != "0.2.0" {
		t.Fatalf("%s release annotation = %q, want 0.2.0", subnets, c.Annotations[AnnotationRelease])
	}
	rs, err = Ensure(bg(), k8s, want, "0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Action != Current {
			t.Errorf("a second Ensure did %s to %s, want %s", r.Action, r.Name, Current)
		}
	}
}

// TestEnsureNeverDowngrades: a CRD written by a newer release stays as it
// is when an older manager starts.
func TestEnsureNeverDowngrades(t *testing.T) {
	want, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	const networks = "networks.networking.estuary.io"
	olden(t, networks, "9.0.0")
	rs, err := Ensure(bg(), k8s, want, "0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(rs)[networks]; got != KeptNewer {
		t.Fatalf("Ensure of release 0.2.0 on %s written by 9.0.0: %s, want %s", networks, got, KeptNewer)
	}
	if c := get(t, networks); len(c.Spec.Names.Categories) != 0 || c.Annotations[AnnotationRelease] != "9.0.0" {
		t.Fatalf("%s was changed by an older manager: categories %v, release %q", networks, c.Spec.Names.Categories, c.Annotations[AnnotationRelease])
	}
	// A development build (not a semantic version) replaces it.
	rs, err = Ensure(bg(), k8s, want, "dev")
	if err != nil || actions(rs)[networks] != Updated {
		t.Fatalf("Ensure of a development build: %v, %v; want %s", rs, err, Updated)
	}
}

// TestEnsureNamesAMissingCRD: the manager never creates a CRD; a missing
// one is an error naming it and how to install it.
func TestEnsureNamesAMissingCRD(t *testing.T) {
	want, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	missing := want[0].DeepCopy()
	missing.Name = "widgets.networking.estuary.io"
	_, err = Ensure(bg(), k8s, []apiextensionsv1.CustomResourceDefinition{*missing}, "0.2.0")
	if err == nil || !strings.Contains(err.Error(), "CRD widgets.networking.estuary.io is not installed") {
		t.Fatalf("Ensure of a missing CRD = %v; want an error naming it", err)
	}
}

// TestEnsureReportsAMissingOptionalCRD: a CRD only an optional feature
// needs (address history), missing on a cluster upgraded with helm upgrade,
// is reported Absent and the others are still brought to the schema.
func TestEnsureReportsAMissingOptionalCRD(t *testing.T) {
	want, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var optional *apiextensionsv1.CustomResourceDefinition
	for i := range want {
		if Optional[want[i].Name] {
			optional = want[i].DeepCopy()
		}
	}
	if optional == nil {
		t.Fatal("no embedded CRD is optional")
	}
	missing := optional.DeepCopy()
	missing.Name = "absents.networking.estuary.io"
	Optional[missing.Name] = true
	t.Cleanup(func() { delete(Optional, missing.Name) })
	rs, err := Ensure(bg(), k8s, []apiextensionsv1.CustomResourceDefinition{*missing, want[0]}, "0.2.0")
	if err != nil {
		t.Fatalf("Ensure with a missing optional CRD: %v", err)
	}
	if a := actions(rs); a[missing.Name] != Absent || a[want[0].Name] == "" {
		t.Errorf("actions %v, want %s for %s and an action for %s", a, Absent, missing.Name, want[0].Name)
	}
}

func TestEmbeddedAreEstuarysThree(t *testing.T) {
	want, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range want {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "iphistories.networking.estuary.io,ipinstances.networking.estuary.io,networks.networking.estuary.io,subnets.networking.estuary.io" {
		t.Fatalf("embedded CRDs = %v", names)
	}
}
