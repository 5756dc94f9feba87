package nodesnap

import (
	"context"
	"fmt"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/nodereport"
)

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
func Collect(ctx context.Context, o CollectOptions) nodereport.Report {
	r := nodereport.Report{Node: o.Node, Version: o.Version, Taken: time.Now().UTC()}
	h, err := ops.Open(o.Netns)
	if err != nil {
		r.Sections = append(r.Sections, nodereport.Section{Name: "netlink", Lines: []string{}, Error: err.Error()})
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
func read(ctx context.Context, s Source) (sec nodereport.Section) {
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
