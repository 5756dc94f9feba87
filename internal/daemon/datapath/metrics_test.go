package datapath

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// reconcileCounts reads the pass counts by result and the failures by part.
func reconcileCounts(t *testing.T, m *Metrics) (passes map[string]uint64, failures map[string]float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	passes, failures = map[string]uint64{}, map[string]float64{}
	for _, mf := range families {
		for _, s := range mf.GetMetric() {
			if len(s.GetLabel()) == 0 {
				continue
			}
			label := s.GetLabel()[0].GetValue()
			switch mf.GetName() {
			case "estuary_datapath_reconcile_duration_seconds":
				passes[label] = s.GetHistogram().GetSampleCount()
			case "estuary_datapath_reconcile_failures_total":
				failures[label] = s.GetCounter().GetValue()
			}
		}
	}
	return passes, failures
}

// TestLoopRecordsEveryPassAndItsFailedParts: each pass is observed under its
// result, and each failed pass counts every part it names once, however its
// errors were joined or wrapped; an error no part claims counts as other.
func TestLoopRecordsEveryPassAndItsFailedParts(t *testing.T) {
	m := NewMetrics()
	_, n := runLoopWith(t, Options{Resync: time.Hour, Metrics: m}, func(call int32) error {
		switch call {
		case 1:
			return errors.Join(inPart(PartOverlay, errors.New("apply")), inPart(PartBGP, errors.New("peer")),
				inPart(PartOverlay, errors.New("publish")))
		case 2:
			return fmt.Errorf("pass: %w", inPart(PartUnderlay, errors.New("uplink")))
		case 3:
			return errors.New("unclaimed")
		}
		return nil
	})
	waitFor(t, n, 4)
	deadline := time.Now().Add(10 * time.Second)
	passes, failures := reconcileCounts(t, m)
	for passes["success"] < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no successful pass observed; passes %v", passes)
		}
		time.Sleep(5 * time.Millisecond)
		passes, failures = reconcileCounts(t, m)
	}
	if passes["error"] != 3 || passes["success"] != 1 {
		t.Errorf("passes by result = %v, want 3 error and 1 success", passes)
	}
	want := map[string]float64{PartLocalPods: 0, PartRead: 0, PartOverlay: 1, PartUnderlay: 1, PartBGP: 1,
		PartFastPath: 0, PartOther: 1}
	for part, v := range want {
		if failures[part] != v {
			t.Errorf("failures{part=%q} = %v, want %v (all: %v)", part, failures[part], v, failures)
		}
	}
}

// TestMetricsSeriesStartAtZero: every result and part has its series before
// the first pass, and nothing else is labelled.
func TestMetricsSeriesStartAtZero(t *testing.T) {
	m := NewMetrics()
	if got := testutil.CollectAndCount(m, "estuary_datapath_reconcile_failures_total"); got != len(Parts) {
		t.Errorf("%d failure series, want %d", got, len(Parts))
	}
	if got := testutil.CollectAndCount(m, "estuary_datapath_reconcile_duration_seconds"); got != 2 {
		t.Errorf("%d duration series, want 2", got)
	}
	var nilMetrics *Metrics
	nilMetrics.observe(time.Now(), time.Now(), errors.New("ignored")) // a loop without metrics records nothing
}

func TestFailedParts(t *testing.T) {
	for _, c := range []struct {
		err  error
		want []string
	}{
		{inPart(PartRead, errors.New("x")), []string{PartRead}},
		{fmt.Errorf("a: %w, b: %w", inPart(PartBGP, errors.New("x")), inPart(PartFastPath, errors.New("y"))),
			[]string{PartBGP, PartFastPath}},
		{errors.Join(nil, inPart(PartLocalPods, errors.New("x")), fmt.Errorf("w: %w", inPart(PartLocalPods, errors.New("y")))),
			[]string{PartLocalPods}},
		{errors.New("x"), []string{PartOther}},
	} {
		if got := failedParts(c.err); !slices.Equal(got, c.want) {
			t.Errorf("failedParts(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if inPart(PartRead, nil) != nil {
		t.Error("inPart(nil) is not nil")
	}
}
