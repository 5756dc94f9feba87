package scale

import (
	"math"
	"testing"
)

const page = `# HELP x_seconds a histogram
# TYPE x_seconds histogram
x_seconds_bucket{type="admit",le="0.005"} 10
x_seconds_bucket{type="admit",le="0.01"} 90
x_seconds_bucket{type="admit",le="0.1"} 100
x_seconds_bucket{type="admit",le="+Inf"} 100
x_seconds_sum{type="admit"} 0.9
x_seconds_count{type="admit"} 100
x_seconds_bucket{type="validating",le="0.005"} 0
x_seconds_bucket{type="validating",le="0.01"} 0
x_seconds_bucket{type="validating",le="0.1"} 0
x_seconds_bucket{type="validating",le="+Inf"} 4
rest_client_requests_total{code="201",host="10.79.0.1:443",method="POST"} 7
rest_client_requests_total{code="200",host="10.79.0.1:443",method="GET"} 3
rest_client_requests_total{code="409",host="10.79.0.1:443",method="POST"} 1
odd{msg="a \"quoted\", value"} 2
`

func TestParseMetricsSumsByLabel(t *testing.T) {
	ss := parseMetrics(page)
	if got := ss.sum("rest_client_requests_total", map[string]string{"method": "POST"}); got != 8 {
		t.Errorf("POST requests: %v, want 8", got)
	}
	by := ss.byLabel("rest_client_requests_total", "method", nil)
	if by["GET"] != 3 || by["POST"] != 8 {
		t.Errorf("by method: %v, want GET 3, POST 8", by)
	}
	if got := ss.sum("odd", map[string]string{"msg": `a "quoted", value`}); got != 2 {
		t.Errorf("escaped label value: %v, want 2", got)
	}
}

func TestHistogramQuantileInterpolates(t *testing.T) {
	ss := parseMetrics(page)
	h := ss.histogramOf("x_seconds", map[string]string{"type": "admit"})
	if h.count != 100 || h.sum != 0.9 {
		t.Fatalf("count %v sum %v, want 100 and 0.9", h.count, h.sum)
	}
	// p50: rank 50 lies in (0.005, 0.01], 40 of its 80 observations in.
	if got := h.quantile(0.5); math.Abs(got-0.0075) > 1e-9 {
		t.Errorf("p50 %v, want 0.0075", got)
	}
	// p99: rank 99 in (0.01, 0.1], 9 of its 10.
	if got := h.quantile(0.99); math.Abs(got-0.091) > 1e-9 {
		t.Errorf("p99 %v, want 0.091", got)
	}
	if got := h.upperBoundOfMax(); got != 0.1 {
		t.Errorf("max bound %v, want 0.1", got)
	}
	v := ss.histogramOf("x_seconds", map[string]string{"type": "validating"})
	if got := v.quantile(0.99); got != 0.1 {
		t.Errorf("p99 in +Inf bucket: %v, want the highest finite bound 0.1", got)
	}
}

func TestHistogramMinusIsTheInterval(t *testing.T) {
	ss := parseMetrics(page)
	after := ss.histogramOf("x_seconds", map[string]string{"type": "admit"})
	before := parseMetrics(`x_seconds_bucket{le="0.005"} 10
x_seconds_bucket{le="0.01"} 10
x_seconds_bucket{le="0.1"} 10
x_seconds_bucket{le="+Inf"} 10
x_seconds_sum 0.05
x_seconds_count 10
`).histogramOf("x_seconds", nil)
	d := after.minus(before)
	if d.count != 90 || d.counts[0] != 0 || d.counts[1] != 80 {
		t.Errorf("interval: count %v buckets %v, want 90 and [0 80 90 90]", d.count, d.counts)
	}
	if math.IsNaN(d.quantile(0.5)) {
		t.Error("quantile of a non-empty interval is NaN")
	}
}
