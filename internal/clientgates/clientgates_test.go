package clientgates

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/features"
)

// TestApplyTurnsWatchListOffUnlessTheEnvironmentSaysSo: after Apply the
// informers list (WatchListClient off) and every other gate reads as
// before; with KUBE_FEATURE_WatchListClient set, Apply changes nothing.
func TestApplyTurnsWatchListOffUnlessTheEnvironmentSaysSo(t *testing.T) {
	before := features.FeatureGates()
	t.Cleanup(func() { features.ReplaceFeatureGates(before) })
	if !before.Enabled(features.WatchListClient) {
		t.Fatal("client-go's default has WatchListClient off; the gate this package changes is already off")
	}
	other := features.InformerResourceVersion
	want := before.Enabled(other)

	t.Setenv(EnvWatchList, "true")
	Apply(logr.Discard())
	if !features.FeatureGates().Enabled(features.WatchListClient) {
		t.Error("with the environment setting the gate, Apply turned WatchListClient off")
	}

	t.Setenv(EnvWatchList, "") // restored when the test ends
	if err := os.Unsetenv(EnvWatchList); err != nil {
		t.Fatal(err)
	}
	Apply(logr.Discard())
	if features.FeatureGates().Enabled(features.WatchListClient) {
		t.Error("after Apply, WatchListClient is on")
	}
	if got := features.FeatureGates().Enabled(other); got != want {
		t.Errorf("after Apply, %s is %v; want %v as before", other, got, want)
	}
}
