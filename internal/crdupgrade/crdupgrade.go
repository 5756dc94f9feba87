// Package crdupgrade brings estuary's CustomResourceDefinitions in the
// cluster to the schema of the running manager.
//
// Helm installs a chart's crds/ directory on the first install only and
// never upgrades it, so after `helm upgrade` the cluster would keep the
// previous release's schema: new fields pruned, new validation and printer
// columns missing. The manager therefore carries its CRDs (package
// config/crd, generated from api/v1) and, before its controllers start,
// replaces the spec of each installed CRD that differs.
//
// Rules:
//
//   - only the four CRDs estuary defines, by name, and only their spec
//     and two annotations: the release (networking.estuary.io/crd-release,
//     the manager's version) and a hash of the spec it wrote
//     (networking.estuary.io/crd-spec-hash), by which an unchanged CRD is
//     recognised without comparing the defaulted spec;
//   - never downgrade: a CRD written by a newer release (both versions
//     semantic versions, the installed one greater) is kept, so that an old
//     replica starting during a rollout cannot take fields away. Builds of
//     one version (development builds) replace each other;
//   - never create: a missing CRD is an install problem (Helm installs
//     them), reported as an error naming the CRD, and the manager's RBAC
//     grants only get and update, by name.
//
// The chart also installs the ClusterNetworkPolicy CRD of
// sigs.k8s.io/network-policy-api (config/crd's Policy files), which other
// network plugins and users install too, and which estuary does not define.
// EnsureOwned upgrades such a CRD only when all of these hold:
//
//   - the installed one carries estuary's networking.estuary.io/policy-api
//     annotation (the chart's copy does); a CRD installed by someone else
//     is left alone (Foreign), and an absent one is no error (Absent:
//     installed with --skip-crds, or not at all);
//   - it is not newer than the embedded copy (else KeptNewer, with the
//     reason): upstream's policy.networking.k8s.io/bundle-version is not a
//     greater semantic version (nor a value that is not one), whatever
//     estuary's annotations say, since `kubectl apply` of upstream's CRD
//     over the chart's copy raises bundle-version and keeps estuary's
//     annotations; the network-policy-api version estuary's annotation
//     names is not greater; it serves or stores no version the embedded
//     copy lacks (replacing it would drop that version, which the API
//     server refuses while objects are stored in it); and it was not
//     written by a newer release.
//
// An update writes the annotations of the embedded copy as well
// (upstream's bundle-version and channel, which network-policy-api's
// conformance suite reads). A failure on such a CRD (a read or update the
// API server refuses, conflicts past the retries) is never fatal: it is
// reported as Failed with its error, the next CRD is tried, and the
// manager goes on with the CRD as it was (it logs the error, records a
// Warning Event CRDUpgradeFailed on the CRD and sets
// estuary_manager_crd_upgrade_failed). A failure on one of estuary's own
// four CRDs stops the manager, since its controllers need their schema.
package crdupgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/config/crd"
)

// Annotations the manager writes on the CRDs it upgrades.
const (
	AnnotationRelease  = "networking.estuary.io/crd-release"
	AnnotationSpecHash = "networking.estuary.io/crd-spec-hash"
	// AnnotationPolicyAPI marks a network-policy-api CRD that estuary's
	// chart installed; its value is the module and version it came from
	// (sigs.k8s.io/network-policy-api@v0.3.0).
	AnnotationPolicyAPI = "networking.estuary.io/policy-api"
	// AnnotationBundleVersion is network-policy-api's own annotation on
	// its CRDs: the bundle (release) the CRD is from, v0.3.0. Whoever
	// applies upstream's CRD sets it.
	AnnotationBundleVersion = "policy.networking.k8s.io/bundle-version"
)

// Action is what Ensure did to one CRD.
type Action string

// The actions.
const (
	Current   Action = "current"    // already the manager's schema
	Updated   Action = "updated"    // spec replaced
	KeptNewer Action = "kept-newer" // newer than the manager's (Reason says how); left alone
	Foreign   Action = "foreign"    // not installed by estuary (EnsureOwned); left alone
	Absent    Action = "absent"     // not installed (EnsureOwned); nothing to do
	Failed    Action = "failed"     // could not be read or written (EnsureOwned; Err says why); left as it was
)

// Result is one CRD's outcome.
type Result struct {
	Name   string
	Action Action
	// Release is the release that wrote the CRD before (empty: Helm's
	// install, or a manager before this package).
	Release string
	// Reason says why a KeptNewer CRD is newer.
	Reason string
	// Err is why a Failed CRD could not be brought to the manager's
	// schema.
	Err error
}

// Embedded returns the manager's CRDs.
func Embedded() ([]apiextensionsv1.CustomResourceDefinition, error) {
	return embedded(crd.Files, "embedded CRDs")
}

// EmbeddedPolicy returns the network-policy-api CRDs the chart installs,
// which EnsureOwned upgrades; each carries AnnotationPolicyAPI.
func EmbeddedPolicy() ([]apiextensionsv1.CustomResourceDefinition, error) {
	out, err := embedded(crd.Policy, "embedded policy CRDs")
	if err != nil {
		return nil, err
	}
	for _, c := range out {
		if c.Annotations[AnnotationPolicyAPI] == "" {
			return nil, fmt.Errorf("embedded policy CRD %s has no %s annotation (run make generate)", c.Name, AnnotationPolicyAPI)
		}
	}
	return out, nil
}

func embedded(fsys fs.FS, what string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sort.Strings(names)
	var out []apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", what, n, err)
		}
		var c apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", what, n, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: none", what)
	}
	return out, nil
}

// SpecHash is the hash Ensure records for a spec.
func SpecHash(spec apiextensionsv1.CustomResourceDefinitionSpec) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hash CRD spec: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// Ensure brings each installed CRD of want to its spec, as release (the
// manager's version), following the package rules. It stops at the first
// error, which names the CRD.
func Ensure(ctx context.Context, c client.Client, want []apiextensionsv1.CustomResourceDefinition, release string) ([]Result, error) {
	return ensure(ctx, c, want, release, false)
}

// EnsureOwned is Ensure for CRDs estuary shares with others (EmbeddedPolicy):
// an installed CRD is brought to want's spec only when it carries
// AnnotationPolicyAPI and is not newer than want (see the package rules);
// one without is left alone (Foreign), and a missing one is no error
// (Absent). It never fails: a CRD it cannot read or write is reported
// (Failed, with Err) and the next one is tried.
func EnsureOwned(ctx context.Context, c client.Client, want []apiextensionsv1.CustomResourceDefinition, release string) []Result {
	results, _ := ensure(ctx, c, want, release, true)
	return results
}

func ensure(ctx context.Context, c client.Client, want []apiextensionsv1.CustomResourceDefinition, release string, shared bool) ([]Result, error) {
	var results []Result
	for i := range want {
		r, err := ensureOne(ctx, c, &want[i], release, shared)
		if err != nil && shared {
			r = Result{Name: want[i].Name, Action: Failed, Release: r.Release, Err: err}
		} else if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, nil
}

// Optional are estuary CRDs that only a feature which can run without them
// needs (address history): a release that adds one reaches clusters
// upgraded with `helm upgrade`, which installs no new CRD, so a missing one
// is reported (Absent) rather than fatal, and the feature stays off until
// the CRD is applied.
var Optional = map[string]bool{"iphistories.networking.estuary.io": true}

func ensureOne(ctx context.Context, c client.Client, want *apiextensionsv1.CustomResourceDefinition, release string, shared bool) (Result, error) {
	hash, err := SpecHash(want.Spec)
	if err != nil {
		return Result{}, err
	}
	r := Result{Name: want.Name}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: want.Name}, &cur); err != nil {
			switch {
			case apierrors.IsNotFound(err) && (shared || Optional[want.Name]):
				r.Action = Absent
				return nil
			case apierrors.IsNotFound(err):
				return fmt.Errorf("CRD %s is not installed (install the chart's crds/, or kubectl apply -f charts/estuary/crds/): %w", want.Name, err)
			}
			return fmt.Errorf("read CRD %s: %w", want.Name, err)
		}
		r.Release = cur.Annotations[AnnotationRelease]
		if shared {
			if cur.Annotations[AnnotationPolicyAPI] == "" {
				r.Action = Foreign
				return nil
			}
			if r.Reason = sharedNewer(&cur, want); r.Reason != "" {
				r.Action = KeptNewer
				return nil
			}
		}
		switch {
		case cur.Annotations[AnnotationSpecHash] == hash:
			r.Action = Current
			return nil
		case newer(r.Release, release):
			r.Action, r.Reason = KeptNewer, fmt.Sprintf("written by release %s, newer than %s", r.Release, release)
			return nil
		}
		cur.Spec = want.Spec
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		if shared {
			for k, v := range want.Annotations {
				cur.Annotations[k] = v
			}
		}
		cur.Annotations[AnnotationRelease], cur.Annotations[AnnotationSpecHash] = release, hash
		if err := c.Update(ctx, &cur); err != nil {
			return fmt.Errorf("update CRD %s: %w", want.Name, err)
		}
		r.Action = Updated
		return nil
	})
	return r, err
}

// sharedNewer says why the installed copy cur of a shared CRD is newer than
// want, or "" when it is not: upstream's bundle-version is a greater
// semantic version (or one that cannot be compared, which is not taken
// for older), whoever wrote it and whatever estuary's annotations say;
// estuary's policy-api annotation names a newer network-policy-api; or cur
// serves or stores a version want lacks, which replacing it would drop.
func sharedNewer(cur, want *apiextensionsv1.CustomResourceDefinition) string {
	have, embedded := cur.Annotations[AnnotationBundleVersion], want.Annotations[AnnotationBundleVersion]
	if newer(have, embedded) {
		return fmt.Sprintf("%s %s is newer than the manager's %s", AnnotationBundleVersion, have, embedded)
	}
	if have != "" && have != embedded && !semantic(have) {
		return fmt.Sprintf("%s %q is not a semantic version, so it cannot be shown older than the manager's %s",
			AnnotationBundleVersion, have, embedded)
	}
	if h, e := moduleVersion(cur.Annotations[AnnotationPolicyAPI]), moduleVersion(want.Annotations[AnnotationPolicyAPI]); newer(h, e) {
		return fmt.Sprintf("%s names network-policy-api %s, newer than the manager's %s", AnnotationPolicyAPI, h, e)
	}
	known := map[string]bool{}
	for _, v := range want.Spec.Versions {
		known[v.Name] = true
	}
	for _, v := range cur.Spec.Versions {
		if (v.Served || v.Storage) && !known[v.Name] {
			return fmt.Sprintf("it serves version %s, which the manager's copy lacks", v.Name)
		}
	}
	for _, v := range cur.Status.StoredVersions {
		if !known[v] {
			return fmt.Sprintf("objects are stored in version %s, which the manager's copy lacks", v)
		}
	}
	return ""
}

// semantic reports whether s is a semantic version.
func semantic(s string) bool {
	_, err := version.ParseSemantic(s)
	return err == nil
}

// moduleVersion is the version of a module@version annotation value
// (empty when it names none).
func moduleVersion(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// newer reports whether installed is a semantic version greater than
// running; false when either is not one.
func newer(installed, running string) bool {
	a, err := version.ParseSemantic(installed)
	if err != nil {
		return false
	}
	b, err := version.ParseSemantic(running)
	if err != nil {
		return false
	}
	return a.GreaterThan(b)
}
