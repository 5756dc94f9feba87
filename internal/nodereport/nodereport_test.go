package nodereport

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

func testReport() Report {
	return Report{Node: "n1", Version: "estuary-daemon 0.2.0", Taken: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Sections: []Section{
			{Name: "links", Lines: []string{"lo: <UP,LOOPBACK> mtu 65536", "eth0: <UP> mtu 1500"}},
			{Name: "endpoints", Lines: []string{}, Error: "daemon not answering"},
		}}
}

// The daemon prints the report as JSON and the plugin reads it back: the
// round trip keeps every field.
func TestReportJSONRoundTrip(t *testing.T) {
	in := testReport()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Report
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

// Section finds a section by name, Failed lists the unreadable ones and
// WriteText prints the header, each section's count, error and lines.
func TestReportReading(t *testing.T) {
	r := testReport()
	if s, ok := r.Section("links"); !ok || len(s.Lines) != 2 {
		t.Errorf("Section(links) = %+v, %v", s, ok)
	}
	if _, ok := r.Section("routes"); ok {
		t.Error("Section(routes) found a section the report lacks")
	}
	if f := r.Failed(); !slices.Equal(f, []string{"endpoints: daemon not answering"}) {
		t.Errorf("Failed() = %q", f)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "node n1, taken 2026-01-02T03:04:05Z by estuary-daemon 0.2.0\n" +
		"\n== links (2)\n   lo: <UP,LOOPBACK> mtu 65536\n   eth0: <UP> mtu 1500\n" +
		"\n== endpoints (0)\n   ERROR: daemon not answering\n"
	if b.String() != want {
		t.Errorf("WriteText:\n%s\nwant:\n%s", b.String(), want)
	}
}
