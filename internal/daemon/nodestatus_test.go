package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/version"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// recorded collects the Events a reporter records.
type recorded struct {
	mu     sync.Mutex
	events []string // "Type Reason: note"
}

func (r *recorded) Record(eventType, reason, _, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s: %s", eventType, reason, note))
}

// take returns the Events recorded since the last take.
func (r *recorded) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func reasons(events []string) []string {
	var out []string
	for _, e := range events {
		out = append(out, strings.TrimSuffix(strings.Fields(e)[1], ":"))
	}
	return out
}

// nodeStatus reads the published annotation of node.
func nodeStatus(t *testing.T, k8s client.Client, node string) (*estuaryv1.NodeDaemonStatus, string) {
	t.Helper()
	var n corev1.Node
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	v, ok := n.Annotations[estuaryv1.AnnotationDaemonStatus]
	if !ok {
		return nil, n.ResourceVersion
	}
	var st estuaryv1.NodeDaemonStatus
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		t.Fatalf("annotation %s = %q: %v", estuaryv1.AnnotationDaemonStatus, v, err)
	}
	return &st, n.ResourceVersion
}

// TestStatusReporterPublishesOnChangeAndRecordsTransitions runs passes of
// the reporter against a real API server and a real conf dir: the first
// publishes the status; one without change writes nothing; a conflist
// removed by someone else is written again; one that cannot be written is
// published and recorded once (ConflistNotWritten), and its return once
// (ConflistInstalled); a file that sorts before estuary's is named; a
// refused fast path is recorded at the first pass only, and not again by a
// restarted daemon that finds it already published.
func TestStatusReporterPublishesOnChangeAndRecordsTransitions(t *testing.T) {
	_, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "net.d")
	path := filepath.Join(dir, ConflistName)
	refused := estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathRefused, Reason: "program needs bpf_redirect_peer"}
	ev := &recorded{}
	newReporter := func() *statusReporter {
		return &statusReporter{node: "node-a", reader: k8s, writer: k8s, events: ev, dir: dir,
			list: NewConflist("/run/estuary/cni.sock", 30*time.Second), fastPath: refused, interval: time.Second}
	}
	r := newReporter()
	pass := func(what string) (*estuaryv1.NodeDaemonStatus, string) {
		t.Helper()
		if err := r.pass(ctx); err != nil {
			t.Fatalf("%s: pass: %v", what, err)
		}
		return nodeStatus(t, k8s, "node-a")
	}

	st, rv := pass("first pass")
	want := estuaryv1.NodeDaemonStatus{Version: version.Version, FastPath: refused,
		Conflist: estuaryv1.NodeConflistStatus{Path: path, Installed: true}}
	if st == nil || !reflect.DeepEqual(*st, want) {
		t.Fatalf("published %+v, want %+v", st, want)
	}
	if got := reasons(ev.take()); !slices.Equal(got, []string{ReasonFastPathRefused}) {
		t.Fatalf("first pass recorded %v, want [%s]", got, ReasonFastPathRefused)
	}
	if _, rv2 := pass("unchanged"); rv2 != rv {
		t.Errorf("a pass without change wrote the Node (resourceVersion %s -> %s)", rv, rv2)
	}
	if got := ev.take(); len(got) != 0 {
		t.Errorf("a pass without change recorded %v", got)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := pass("conflist removed"); !st.Conflist.Installed {
		t.Errorf("after the conflist was removed: %+v, want it written again", st.Conflist)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("conflist not written again: %v", err)
	}

	// A directory in its place: the conflist cannot be written.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st, _ = pass("conflist blocked"); st.Conflist.Installed || !strings.Contains(st.Conflist.Error, path) {
			t.Fatalf("blocked conflist published as %+v, want not installed with an error naming %s", st.Conflist, path)
		}
	}
	if got := ev.take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonConflistNotWritten+": conflist "+path) {
		t.Fatalf("two passes with the conflist blocked recorded %q, want one %s", got, ReasonConflistNotWritten)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if st, _ = pass("conflist unblocked"); !st.Conflist.Installed || st.Conflist.Error != "" {
		t.Fatalf("unblocked conflist published as %+v", st.Conflist)
	}
	if got := reasons(ev.take()); !slices.Equal(got, []string{ReasonConflistInstalled}) {
		t.Fatalf("unblocking recorded %v, want [%s]", got, ReasonConflistInstalled)
	}

	if err := os.WriteFile(filepath.Join(dir, "05-other.conflist"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ = pass("shadowed"); st.Conflist.ShadowedBy != "05-other.conflist" {
		t.Fatalf("shadowed conflist published as %+v, want shadowedBy 05-other.conflist", st.Conflist)
	}
	if got := reasons(ev.take()); !slices.Equal(got, []string{ReasonConflistShadowed}) {
		t.Fatalf("shadowing recorded %v, want [%s]", got, ReasonConflistShadowed)
	}

	// A restarted daemon compares with what the last one published.
	r = newReporter()
	pass("restarted daemon")
	if got := ev.take(); len(got) != 0 {
		t.Errorf("a restarted daemon with nothing changed recorded %v", got)
	}
}

// TestInstallConflistFailureIsPublished: a conflist that cannot be written
// when the daemon starts stops it with an error naming the file, after the
// status and the Event say so.
func TestInstallConflistFailureIsPublished(t *testing.T) {
	_, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(t.TempDir(), "net.d")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ev := &recorded{}
	r := &statusReporter{node: "node-b", reader: k8s, writer: k8s, events: ev, dir: notADir,
		list: NewConflist("/run/estuary/cni.sock", 30*time.Second), fastPath: estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathLoaded}}
	err = r.installConflist(ctx)
	if err == nil || !strings.Contains(err.Error(), notADir) {
		t.Fatalf("installConflist = %v, want an error naming %s", err, notADir)
	}
	st, _ := nodeStatus(t, k8s, "node-b")
	if st == nil || st.Conflist.Installed || st.Conflist.Error == "" {
		t.Fatalf("published %+v, want the conflist not installed, with its error", st)
	}
	if got := reasons(ev.take()); !slices.Equal(got, []string{ReasonConflistNotWritten}) {
		t.Fatalf("recorded %v, want [%s]", got, ReasonConflistNotWritten)
	}
}

// TestNodeEventsReachTheAPI: Events recorded through nodeEvents are
// written, by close at the latest, as events.k8s.io Events regarding the
// Node, and found the way `kubectl describe node` looks for them (core v1
// Events of kind Node, with the node's name as UID, in namespace default).
func TestNodeEventsReachTheAPI(t *testing.T) {
	_, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	e := newNodeEvents(k8s, "node-c")
	e.Record(corev1.EventTypeWarning, ReasonFastPathRefused, "LoadFastPath", "the kernel refused: "+strings.Repeat("x", 2000))
	e.Record(corev1.EventTypeNormal, ReasonConflistInstalled, "InstallConflist", "conflist written")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.close(ctx)
	e.Record(corev1.EventTypeNormal, ReasonConflistInstalled, "InstallConflist", "after close") // dropped, no panic

	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range list.Items {
		if ev.ReportingController != eventsController {
			// The API server's own (e.g. its ClusterIP repair controller's
			// warning about the kubernetes Service while it starts).
			continue
		}
		if ev.Regarding.Kind != "Node" || ev.Regarding.Name != "node-c" {
			t.Errorf("event %s regards %+v", ev.Name, ev.Regarding)
		}
		if len(ev.Note) > eventNoteMax {
			t.Errorf("event %s note is %d bytes, over %d", ev.Name, len(ev.Note), eventNoteMax)
		}
		got = append(got, ev.Type+" "+ev.Reason)
	}
	slices.Sort(got)
	if want := []string{"Normal " + ReasonConflistInstalled, "Warning " + ReasonFastPathRefused}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var core corev1.EventList
	if err := k8s.List(ctx, &core, client.InNamespace(metav1.NamespaceDefault), client.MatchingFields{
		"involvedObject.kind": "Node", "involvedObject.name": "node-c", "involvedObject.uid": "node-c",
	}); err != nil {
		t.Fatal(err)
	}
	if len(core.Items) != 2 {
		t.Errorf("kubectl describe node's query finds %d events, want 2", len(core.Items))
	}
}
