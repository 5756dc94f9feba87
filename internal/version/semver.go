package version

import (
	"fmt"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// Semver is a parsed semantic version.
type Semver struct {
	Major, Minor, Patch int
	Prerelease          string // after "-", e.g. rc.1
	Build               string // after "+"
}

// Parse parses a semantic version (semver.org 2.0.0, strictly: three
// numbers without leading zeros, no surrounding space); a leading "v" is
// allowed.
func Parse(s string) (Semver, error) {
	v, err := utilversion.ParseSemantic(s)
	if err != nil || strings.TrimSpace(s) != s {
		return Semver{}, fmt.Errorf("%q is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])", s)
	}
	return Semver{Major: int(v.Major()), Minor: int(v.Minor()), Patch: int(v.Patch()), Prerelease: v.PreRelease(),
		Build: v.BuildMetadata()}, nil
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
