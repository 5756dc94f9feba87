// Package uplink chooses a node's link for each kind of network from
// ordered preference lists: the chart's list per mode, which a Node
// annotation overrides for that node. The first candidate that exists on the
// node is used; none existing is a problem to report, never a reason to fall
// back to another link. Names are exact (no patterns), as the kernel knows
// them: 1 to 15 bytes, no slash, no white space, not "." or "..".
package uplink

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Mode is the kind of network a link carries.
type Mode string

// The modes with a preference list.
const (
	// VLAN is the underlay's VLAN networks: the parent of their 802.1Q
	// sub-interfaces and the link of untagged ones.
	VLAN Mode = "vlan"
	// BGP is the underlay's BGP networks: the link their peers are on.
	BGP Mode = "bgp"
	// VXLAN is the overlay: the link the tunnel runs over.
	VXLAN Mode = "vxlan"
)

// Modes are the modes in the order they are reported.
var Modes = []Mode{VLAN, BGP, VXLAN}

// AnnotationPrefix prefixes the Node annotations naming a node's own
// ordered candidates per mode (AnnotationPrefix + mode, a comma-separated
// list); they take precedence over the chart's lists.
const AnnotationPrefix = "networking.estuary.io/uplink-"

// Annotation is the Node annotation of mode.
func Annotation(m Mode) string { return AnnotationPrefix + string(m) }

// maxNameLen is the kernel's limit on a link name (IFNAMSIZ less the NUL).
const maxNameLen = 15

// ValidName says why name cannot be a link name, nil when it can be.
func ValidName(name string) error {
	switch {
	case name == "":
		return errors.New("empty link name")
	case len(name) > maxNameLen:
		return fmt.Errorf("link name %q is %d bytes, over the kernel's %d", name, len(name), maxNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("link name %q is not allowed", name)
	case strings.ContainsFunc(name, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) }):
		return fmt.Errorf("link name %q holds a slash, colon or space", name)
	}
	return nil
}

// Validate checks every name of list.
func Validate(list []string) error {
	for i, n := range list {
		if err := ValidName(n); err != nil {
			return fmt.Errorf("entry %d: %w", i+1, err)
		}
	}
	return nil
}

// ParseList parses a comma-separated list of link names, in order; every
// entry must be a valid name (an empty entry, as in "eth0,,bond0", is
// refused).
func ParseList(s string) ([]string, error) {
	list := strings.Split(s, ",")
	if err := Validate(list); err != nil {
		return nil, err
	}
	return list, nil
}

// Source says where a mode's candidates came from.
type Source string

// Values of Source.
const (
	// FromAnnotation: the node's annotation.
	FromAnnotation Source = "annotation"
	// FromConfig: the daemon's configuration (the chart).
	FromConfig Source = "config"
	// FromDefault: nothing configured; the mode's default link (the
	// tunnel's parent, or for the overlay the link of the default route).
	FromDefault Source = "default"
)

// Candidates is a mode's ordered list and where it came from.
type Candidates struct {
	Mode   Mode
	Names  []string
	Source Source
	// Refused says why the node's annotation was not used (it was
	// malformed); the configured list applies meanwhile.
	Refused string
}

// Resolve returns mode's candidates on node: its annotation when set and
// valid, else configured, else none (FromDefault). A malformed annotation
// changes nothing: configured applies and Refused says why.
func Resolve(m Mode, node string, annotations map[string]string, configured []string) Candidates {
	c := Candidates{Mode: m, Names: configured, Source: FromConfig}
	if len(configured) == 0 {
		c.Source = FromDefault
	}
	v, ok := annotations[Annotation(m)]
	if !ok {
		return c
	}
	list, err := ParseList(v)
	if err != nil {
		c.Refused = fmt.Sprintf("annotation %s=%q on node %s refused: %v", Annotation(m), v, node, err)
		return c
	}
	c.Names, c.Source = list, FromAnnotation
	return c
}

// Choose returns the first of names that exists, and whether one does.
func Choose(names []string, exists func(name string) bool) (string, bool) {
	for _, n := range names {
		if exists(n) {
			return n, true
		}
	}
	return "", false
}
