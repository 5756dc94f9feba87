// Package nodereport is the format of a node's networking report, the
// support bundle's view of a node: a Report of named Sections, each a line
// per object or the error that kept it from being read. The daemon fills
// one from the kernel (package nodesnap, `estuary-daemon node-state`) and
// prints it as JSON; `kubectl estuary sysdump` decodes that JSON and
// renders it with WriteText. The format knows no kernel, so the plugin
// links it on every platform it is released for.
package nodereport

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is a node's state, section by section.
type Report struct {
	Node     string    `json:"node"`
	Version  string    `json:"version"` // of the program that took it
	Taken    time.Time `json:"taken"`
	Sections []Section `json:"sections"`
}

// Section is one part of the state: a line per object, or why it could not
// be read.
type Section struct {
	Name  string   `json:"name"`
	Lines []string `json:"lines"`
	Error string   `json:"error,omitempty"`
}

// Section returns the section called name.
func (r Report) Section(name string) (Section, bool) {
	for _, s := range r.Sections {
		if s.Name == name {
			return s, true
		}
	}
	return Section{}, false
}

// Failed lists the sections that could not be read, as "name: error".
func (r Report) Failed() []string {
	var out []string
	for _, s := range r.Sections {
		if s.Error != "" {
			out = append(out, s.Name+": "+s.Error)
		}
	}
	return out
}

// WriteText renders the report for reading: a header, then each section
// under its name with its lines indented.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	node := r.Node
	if node == "" {
		node = "-"
	}
	fmt.Fprintf(&b, "node %s, taken %s by %s\n", node, r.Taken.Format(time.RFC3339), r.Version)
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n== %s (%d)\n", s.Name, len(s.Lines))
		if s.Error != "" {
			fmt.Fprintf(&b, "   ERROR: %s\n", s.Error)
		}
		for _, l := range s.Lines {
			b.WriteString("   " + l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
