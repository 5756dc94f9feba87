package migrate

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Item is one entry of a report: an object (e.g. "network bgp-a" or
// "ipinstance default/10-0-0-7"), the field concerned (empty for the whole
// object) and what became of it.
type Item struct {
	Object string `json:"object"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

func (i Item) String() string {
	if i.Field == "" {
		return i.Object + ": " + i.Reason
	}
	return i.Object + ": " + i.Field + ": " + i.Reason
}

// Report is what a migration could not carry over, and what the operator
// should know about what it did.
type Report struct {
	// NotMigrated lists every object left out, and every field of a
	// migrated object that estuary cannot express, with why.
	NotMigrated []Item `json:"notMigrated,omitempty"`
	// Notes say how something was carried over where the operator has a
	// step to take or a difference to know of.
	Notes []Item `json:"notes,omitempty"`
}

func (r *Report) skip(object, field, format string, args ...any) {
	r.NotMigrated = append(r.NotMigrated, Item{Object: object, Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (r *Report) note(object, field, format string, args ...any) {
	r.Notes = append(r.Notes, Item{Object: object, Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (r *Report) sort() {
	less := func(a, b Item) int { return strings.Compare(a.String(), b.String()) }
	slices.SortStableFunc(r.NotMigrated, less)
	slices.SortStableFunc(r.Notes, less)
}

// WriteComments writes the report as lines starting with prefix ("# " to
// keep a YAML stream valid).
func (r *Report) WriteComments(w io.Writer, prefix string) error {
	var b strings.Builder
	section := func(title string, items []Item) {
		fmt.Fprintf(&b, "%s%s (%d):\n", prefix, title, len(items))
		for _, i := range items {
			fmt.Fprintf(&b, "%s  %s\n", prefix, i)
		}
	}
	section("not migrated", r.NotMigrated)
	if len(r.Notes) > 0 {
		section("notes", r.Notes)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
