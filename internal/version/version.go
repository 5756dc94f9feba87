// Package version is the version of estuary every binary reports. The
// Makefile (and the release and lab builds) set Version, GitCommit and
// BuildDate with -ldflags "-X"; a plain `go build` reports DevVersion.
package version

import (
	"fmt"
	"runtime"
)

// DevVersion is what a binary built without the version flags reports.
const DevVersion = "0.0.0-dev"

// Set at link time (see LDFlags); strings so that -X can set them.
var (
	// Version is the semantic version, without a leading "v".
	Version = DevVersion
	// GitCommit is the commit the binary was built from.
	GitCommit = "unknown"
	// BuildDate is the committer date of GitCommit (RFC 3339), so that a
	// rebuild of one commit gives the same binary.
	BuildDate = "unknown"
)

// Info is the version of one binary.
type Info struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this binary's version.
func Get() Info {
	return Info{
		Version:   Version,
		GitCommit: GitCommit,
		BuildDate: BuildDate,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the one line `--version` prints for a program name.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.Version, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform)
}

// Line is the `--version` line of the program name: "name 0.2.0 (commit ...)".
func Line(name string) string { return name + " " + Get().String() }

// Stamp is what LDFlags sets.
type Stamp struct {
	Version, GitCommit, BuildDate string
}

// Package is the import path whose variables LDFlags sets.
const Package = "github.com/estuary-cni/estuary/internal/version"

// LDFlags returns the -X linker flags that stamp s into a binary, empty
// fields left out.
func (s Stamp) LDFlags() []string {
	var out []string
	for _, kv := range []struct{ name, value string }{
		{"Version", s.Version}, {"GitCommit", s.GitCommit}, {"BuildDate", s.BuildDate},
	} {
		if kv.value != "" {
			out = append(out, "-X", Package+"."+kv.name+"="+kv.value)
		}
	}
	return out
}

// Current returns the stamp of this binary, for the programs it builds.
func Current() Stamp {
	return Stamp{Version: Version, GitCommit: GitCommit, BuildDate: BuildDate}
}
