package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/estuary-cni/estuary/internal/workload"
)

// TestWorkloadKindsGrant: manager.workloadKinds renders --workload-kinds
// and a get, and nothing more, on each kind's resource (given, or the kind
// in lower case + s).
func TestWorkloadKindsGrant(t *testing.T) {
	ensureNamespace(t)
	kinds := `[{"group":"apps.kruise.io","version":"v1alpha1","kind":"CloneSet","ordinal":true},` +
		`{"group":"argoproj.io","version":"v1alpha1","kind":"Rollout","resource":"rollouts"}]`
	objs := render(t, "--set-json", "manager.workloadKinds="+kinds)
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	args := d.Spec.Template.Spec.Containers[0].Args
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--workload-kinds=") })
	if i < 0 {
		t.Fatalf("manager args %q lack --workload-kinds", args)
	}
	got, err := workload.ParseKinds(strings.TrimPrefix(args[i], "--workload-kinds="))
	want, _ := workload.ParseKinds(kinds)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("manager %s: %+v, %v; want %+v", args[i], got, err, want)
	}
	installRBAC(t, objs)
	user := fmt.Sprintf("system:serviceaccount:%s:estuary-manager", namespace)
	for _, a := range []access{{"get", "apps.kruise.io", "clonesets", "", "default"}, {"get", "argoproj.io", "rollouts", "", "default"}} {
		if !allowed(t, user, a) {
			t.Errorf("estuary-manager may not %s; the chart must grant it", a)
		}
	}
	for _, a := range []access{{"list", "apps.kruise.io", "clonesets", "", ""}, {"update", "argoproj.io", "rollouts", "", "default"},
		{"get", "argoproj.io", "analysisruns", "", "default"}} {
		if allowed(t, user, a) {
			t.Errorf("estuary-manager may %s; the chart must not grant it", a)
		}
	}
}

// TestWorkloadKindsSchema: an entry without a kind, with a misspelt key or
// a kind that is not one is refused by the schema, naming the entry.
func TestWorkloadKindsSchema(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{`[{"group":"apps.kruise.io","version":"v1alpha1"}]`, "at '/manager/workloadKinds/0': missing property 'kind'"},
		{`[{"group":"a.io","version":"v1","kind":"A"},{"group":"b.io","version":"v1","kind":"B","ordinl":true}]`,
			"at '/manager/workloadKinds/1': additional properties 'ordinl' not allowed"},
		{`[{"group":"a.io","version":"v1","kind":"clone set"}]`, "at '/manager/workloadKinds/0/kind'"},
	} {
		_, err := renderErr(t, "--set-json", "manager.workloadKinds="+c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("manager.workloadKinds=%s: %v; want the schema's refusal %q", c.set, err, c.want)
		}
	}
}
