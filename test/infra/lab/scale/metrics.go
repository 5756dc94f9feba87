package scale

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text format: a metric name, its
// labels and its value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// samples is a parsed /metrics page.
type samples []sample

// parseMetrics reads the Prometheus text exposition format; comment lines
// and lines it cannot read are skipped.
func parseMetrics(text string) samples {
	var out samples
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if s, ok := parseLine(line); ok {
			out = append(out, s)
		}
	}
	return out
}

func parseLine(line string) (sample, bool) {
	s := sample{labels: map[string]string{}}
	var rest string
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return s, false
	} else if line[i] == '{' {
		s.name = line[:i]
		j, ok := parseLabels(line[i+1:], s.labels)
		if !ok {
			return s, false
		}
		rest = line[i+1+j:]
	} else {
		s.name, rest = line[:i], line[i:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, false
	}
	s.value = v
	return s, true
}

// parseLabels reads `k="v",...}` into m and returns how many bytes it read.
func parseLabels(in string, m map[string]string) (int, bool) {
	i := 0
	for i < len(in) {
		switch in[i] {
		case '}':
			return i + 1, true
		case ',', ' ':
			i++
			continue
		}
		eq := strings.IndexByte(in[i:], '=')
		if eq < 0 || i+eq+1 >= len(in) || in[i+eq+1] != '"' {
			return 0, false
		}
		key := in[i : i+eq]
		i += eq + 2
		var b strings.Builder
		for i < len(in) && in[i] != '"' {
			if in[i] == '\\' && i+1 < len(in) {
				i++
				switch in[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(in[i])
				}
			} else {
				b.WriteByte(in[i])
			}
			i++
		}
		if i >= len(in) {
			return 0, false
		}
		m[key] = b.String()
		i++
	}
	return 0, false
}

// sum adds the values of every sample named name whose labels match want
// (each key of want with its value; an empty value matches any).
func (ss samples) sum(name string, want map[string]string) float64 {
	var t float64
	for _, s := range ss {
		if s.name == name && matches(s.labels, want) {
			t += s.value
		}
	}
	return t
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// byLabel adds the values of the samples named name matching want, by
// the value of label key.
func (ss samples) byLabel(name, key string, want map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		if s.name == name && matches(s.labels, want) {
			out[s.labels[key]] += s.value
		}
	}
	return out
}

// histogram is a cumulative histogram: upper bounds (the last +Inf) and
// counts, plus the sum of the observations.
type histogram struct {
	bounds []float64
	counts []float64
	sum    float64
	count  float64
}

// histogramOf adds up the histogram name (its _bucket, _sum and _count
// series) over every label set matching want.
func (ss samples) histogramOf(name string, want map[string]string) histogram {
	byBound := map[float64]float64{}
	var h histogram
	for _, s := range ss {
		if !matches(s.labels, want) {
			continue
		}
		switch s.name {
		case name + "_bucket":
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err != nil {
				continue
			}
			byBound[le] += s.value
		case name + "_sum":
			h.sum += s.value
		case name + "_count":
			h.count += s.value
		}
	}
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	slices.Sort(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h
}

// minus is h less an earlier reading of the same histogram.
func (h histogram) minus(earlier histogram) histogram {
	out := histogram{sum: h.sum - earlier.sum, count: h.count - earlier.count}
	for i, b := range h.bounds {
		c := h.counts[i]
		if j := slices.Index(earlier.bounds, b); j >= 0 {
			c -= earlier.counts[j]
		}
		out.bounds = append(out.bounds, b)
		out.counts = append(out.counts, c)
	}
	return out
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear interpolation inside the bucket that holds it. NaN when
// the histogram is empty; the highest finite bound when the quantile lies
// in the +Inf bucket.
func (h histogram) quantile(q float64) float64 {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return math.NaN()
	}
	total := h.counts[len(h.counts)-1]
	rank := q * total
	lower, prev := 0.0, 0.0
	for i, b := range h.bounds {
		c := h.counts[i]
		if c >= rank {
			if math.IsInf(b, 1) {
				return lower
			}
			if c == prev {
				return b
			}
			return lower + (b-lower)*(rank-prev)/(c-prev)
		}
		if !math.IsInf(b, 1) {
			lower = b
		}
		prev = c
	}
	return lower
}

// upperBoundOfMax is the smallest bound under which every observation
// lies (+Inf when some lie above every finite bound).
func (h histogram) upperBoundOfMax() float64 {
	if len(h.counts) == 0 {
		return math.NaN()
	}
	total := h.counts[len(h.counts)-1]
	for i, b := range h.bounds {
		if h.counts[i] >= total {
			return b
		}
	}
	return math.Inf(1)
}

func (h histogram) String() string {
	if h.count == 0 {
		return "no observations"
	}
	return fmt.Sprintf("%g observations, mean %.3f s", h.count, h.sum/h.count)
}
