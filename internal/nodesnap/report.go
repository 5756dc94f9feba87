package nodesnap

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
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

// Source reads one section.
type Source struct {
	Name string
	Read func(ctx context.Context) ([]string, error)
}

// CollectOptions say whose state Collect reads and what it adds.
type CollectOptions struct {
	Node, Version string
	// Netns is the path of the network namespace to read; empty reads the
	// process's own (the node's, for a host-network pod).
	Netns string
	// Extra sources are read after the kernel's sections.
	Extra []Source
}

// Collect reads every section. It never fails: a section that cannot be
// read carries its error.
func Collect(ctx context.Context, o CollectOptions) Report {
	r := Report{Node: o.Node, Version: o.Version, Taken: time.Now().UTC()}
	h, err := ops.Open(o.Netns)
	if err != nil {
		r.Sections = append(r.Sections, Section{Name: "netlink", Lines: []string{}, Error: err.Error()})
	} else {
		for _, s := range kernelSources(h) {
			r.Sections = append(r.Sections, read(ctx, s))
		}
		h.Close()
	}
	for _, s := range append([]Source{{"nftables", nftables(o.Netns)}, {"sysctls", sysctls(o.Netns)}}, o.Extra...) {
		r.Sections = append(r.Sections, read(ctx, s))
	}
	return r
}

// read runs s, turning a panic or error into the section's error.
func read(ctx context.Context, s Source) (sec Section) {
	sec.Name = s.Name
	defer func() {
		if p := recover(); p != nil {
			sec.Lines, sec.Error = nil, fmt.Sprintf("panic: %v", p)
		}
	}()
	lines, err := s.Read(ctx)
	sec.Lines = lines
	if sec.Lines == nil {
		sec.Lines = []string{}
	}
	if err != nil {
		sec.Error = err.Error()
	}
	return sec
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
