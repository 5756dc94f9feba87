package version

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]Semver{
		"0.2.0":              {Minor: 2},
		"v1.10.3":            {Major: 1, Minor: 10, Patch: 3},
		"0.2.0-rc.1":         {Minor: 2, Prerelease: "rc.1"},
		"1.2.3-4-gabc-dirty": {Major: 1, Minor: 2, Patch: 3, Prerelease: "4-gabc-dirty"},
		"1.0.0+build.7":      {Major: 1, Build: "build.7"},
		DevVersion:           {Prerelease: "dev"},
	}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if s := got.String(); s != strings.TrimPrefix(in, "v") {
			t.Errorf("Parse(%q).String() = %q", in, s)
		}
	}
	for _, in := range []string{"", "1.2", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "latest", "1.2.3 "} {
		if v, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", in, v)
		}
	}
}

func TestSkew(t *testing.T) {
	for _, c := range []struct {
		a, b string
		skew bool
	}{
		{"0.2.0", "0.2.5", false},
		{"0.2.0-rc.1", "0.2.0", false},
		{"0.2.0", "0.3.0", true},
		{"1.2.0", "2.2.0", true},
		{"0.2.0", "unknown", true},
	} {
		if got := Skew(c.a, c.b); (got != "") != c.skew {
			t.Errorf("Skew(%q, %q) = %q, want skew %v", c.a, c.b, got, c.skew)
		}
	}
}

func TestLDFlags(t *testing.T) {
	got := strings.Join(Stamp{Version: "0.2.0", GitCommit: "abc"}.LDFlags(), " ")
	want := "-X " + Package + ".Version=0.2.0 -X " + Package + ".GitCommit=abc"
	if got != want {
		t.Errorf("LDFlags = %q, want %q", got, want)
	}
	if l := Line("estuary-manager"); !strings.HasPrefix(l, "estuary-manager "+Version+" (commit ") {
		t.Errorf("Line = %q", l)
	}
}
