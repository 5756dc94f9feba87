package version

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// semverRE is a semantic version (semver.org 2.0.0) without a leading "v".
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// Semver is a parsed semantic version.
type Semver struct {
	Major, Minor, Patch int
	Prerelease          string // after "-", e.g. rc.1
	Build               string // after "+"
}

// Parse parses a semantic version; a leading "v" is allowed.
func Parse(s string) (Semver, error) {
	m := semverRE.FindStringSubmatch(strings.TrimPrefix(s, "v"))
	if m == nil {
		return Semver{}, fmt.Errorf("%q is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])", s)
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(m[i+1])
		if err != nil {
			return Semver{}, fmt.Errorf("version %q: %w", s, err)
		}
		n[i] = v
	}
	return Semver{Major: n[0], Minor: n[1], Patch: n[2], Prerelease: m[4], Build: m[5]}, nil
}

// String formats v without a leading "v".
func (v Semver) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Prerelease != "" {
		s += "-" + v.Prerelease
	}
	if v.Build != "" {
		s += "+" + v.Build
	}
	return s
}

// Skew describes how far apart two versions are: "" when they share a major
// and minor version, else why they do not (or why one cannot be compared).
func Skew(a, b string) string {
	va, err := Parse(a)
	if err != nil {
		return err.Error()
	}
	vb, err := Parse(b)
	if err != nil {
		return err.Error()
	}
	if va.Major != vb.Major || va.Minor != vb.Minor {
		return fmt.Sprintf("%s and %s differ in their minor version", a, b)
	}
	return ""
}
