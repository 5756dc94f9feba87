package ipam

import (
	"slices"
	"testing"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		in          string
		first, last string
		ok          bool
	}{
		{"10.0.0.1", "10.0.0.1", "10.0.0.1", true},
		{"10.0.0.1-10.0.0.9", "10.0.0.1", "10.0.0.9", true},
		{"10.0.0.5-10.0.0.5", "10.0.0.5", "10.0.0.5", true},
		{"fd00::1-fd00::ff", "fd00::1", "fd00::ff", true},
		{"fd00::1", "fd00::1", "fd00::1", true},
		{"", "", "", false},
		{"10.0.0.9-10.0.0.1", "", "", false},          // first > last
		{"10.0.0.1-fd00::1", "", "", false},           // mixed families
		{"10.0.0.1-", "", "", false},                  // missing last
		{"-10.0.0.1", "", "", false},                  // missing first
		{"10.0.0.1-10.0.0.2-10.0.0.3", "", "", false}, // three parts
		{"10.0.0.0/24", "", "", false},                // a prefix is not a range
		{"fe80::1%eth0", "", "", false},               // zone
		{" 10.0.0.1", "", "", false},                  // whitespace
		{"10.0.0.256", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParseRange(tc.in)
			if !tc.ok {
				wantErr(t, err, ErrInvalidConfig, tc.in)
				return
			}
			wantErr(t, err, nil, "")
			if r.First != ip(tc.first) || r.Last != ip(tc.last) {
				t.Fatalf("got %v, want %s-%s", r, tc.first, tc.last)
			}
			back, err := ParseRange(r.String())
			if err != nil || back != r {
				t.Fatalf("round trip of %q via %q: %v, %v", tc.in, r.String(), back, err)
			}
		})
	}
}

func TestRangeContains(t *testing.T) {
	r := rng(t, "10.0.0.5-10.0.0.7")
	for _, tc := range []struct {
		a    string
		want bool
	}{{"10.0.0.4", false}, {"10.0.0.5", true}, {"10.0.0.7", true}, {"10.0.0.8", false}, {"::ffff:10.0.0.6", false}} {
		if got := r.Contains(ip(tc.a)); got != tc.want {
			t.Errorf("Contains(%s) = %v", tc.a, got)
		}
	}
}

func TestSpans(t *testing.T) {
	const top = ^uint64(0)
	tests := []struct {
		name string
		got  spans
		want spans
	}{
		{"normalize merges overlap and adjacency",
			normalize([]span{{10, 20}, {1, 3}, {4, 5}, {15, 30}, {40, 40}}),
			spans{{1, 5}, {10, 30}, {40, 40}}},
		{"normalize at the top of the space",
			normalize([]span{{top - 1, top}, {5, top}, {0, 0}}),
			spans{{0, 0}, {5, top}}},
		{"clip", spans{{1, 5}, {10, 30}, {40, 40}}.clip(3, 35), spans{{3, 5}, {10, 30}}},
		{"subtract splits", spans{{0, 100}}.subtract(spans{{10, 20}, {50, 50}, {90, 200}}),
			spans{{0, 9}, {21, 49}, {51, 89}}},
		{"subtract everything", spans{{5, 10}}.subtract(spans{{0, top}}), nil},
		{"subtract nothing", spans{{5, 10}}.subtract(nil), spans{{5, 10}}},
		{"union", union(spans{{1, 2}}, spans{{3, 4}, {8, 9}}), spans{{1, 4}, {8, 9}}},
	}
	for _, tc := range tests {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	s := spans{{1, 5}, {10, 30}}
	for x, want := range map[uint64]bool{0: false, 1: true, 5: true, 6: false, 10: true, 30: true, 31: false} {
		if s.contains(x) != want {
			t.Errorf("contains(%d) != %v", x, want)
		}
	}
	if n := (spans{{0, 1<<40 - 1}}).count(); n != 1<<40 {
		t.Errorf("count of 2^40 = %d", n)
	}
	if n := (spans{{0, top}}).count(); n != 0 {
		t.Errorf("count of the full space should wrap to 0, got %d", n)
	}
}
