package daemon

// Events on the daemon's Node.
//
// The daemon records a Kubernetes Event (events.k8s.io/v1, regarding its
// Node, in namespace default where the Events of cluster-scoped objects
// go, so `kubectl describe node` and `kubectl events` show them) when
// something an operator must hear of changes: the kernel refused the fast
// path, a BGP session went down or came back, the conflist could not be
// written or was written again, kube-proxy runs in IPVS mode under policy,
// the data path turned stale or fresh again (datapathhealth.go). The parts that know record on transitions
// only, never per pass, so every Event is news.
//
// They are written by one goroutine from a bounded queue, so a slow or
// unreachable API server never holds up the data-path loop; an Event that
// does not fit is logged and dropped (the Node's annotations and the logs
// still say it). close gives the queue a last, bounded moment at stop, so
// a daemon that exits because it could not write its conflist still leaves
// the Event saying why. client-go's events broadcaster is not used: it
// cannot be flushed, and it folds repeats into series with patches that
// transitions never need, so the daemon's RBAC grants create only.

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reasons of the daemon's Events.
const (
	ReasonFastPathRefused    = "FastPathRefused"
	ReasonConflistNotWritten = "ConflistNotWritten"
	ReasonConflistInstalled  = "ConflistInstalled"
	ReasonConflistShadowed   = "ConflistShadowed"
)

const (
	// eventsController is the Events' reportingController.
	eventsController = "estuary-daemon"
	// eventQueue is how many Events may wait to be written.
	eventQueue = 64
	// eventTimeout bounds one Event's create.
	eventTimeout = 10 * time.Second
	// eventNoteMax is the longest note the API accepts (bytes).
	eventNoteMax = 1024
	// maxInstance is the longest reportingInstance the API accepts.
	maxInstance = 128
)

// nodeEvents records Events regarding one Node.
type nodeEvents struct {
	w    client.Writer
	node string

	mu     sync.Mutex
	closed bool
	queue  chan *eventsv1.Event
	done   chan struct{}
}

// newNodeEvents starts the writer of node's Events through w.
func newNodeEvents(w client.Writer, node string) *nodeEvents {
	e := &nodeEvents{w: w, node: node, queue: make(chan *eventsv1.Event, eventQueue), done: make(chan struct{})}
	go e.write()
	return e
}

// Record queues an Event of eventType (corev1.EventTypeNormal or
// EventTypeWarning) on the Node. It never blocks.
func (e *nodeEvents) Record(eventType, reason, action, note string) {
	if e == nil {
		return
	}
	ev := e.event(eventType, reason, action, note)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		log.Info("event not recorded: the daemon is stopping", "reason", reason, "note", note)
		return
	}
	select {
	case e.queue <- ev:
	default:
		log.Info("event not recorded: too many waiting", "reason", reason, "note", note)
	}
}

// event builds the Event. Its regarding reference names the Node as the
// kubelet's Events do (the UID is the node's name), which `kubectl
// describe node` finds.
func (e *nodeEvents) event(eventType, reason, action, note string) *eventsv1.Event {
	now := time.Now()
	if len(note) > eventNoteMax {
		note = note[:eventNoteMax-3] + "..."
	}
	instance := eventsController + "-" + e.node
	if len(instance) > maxInstance {
		instance = instance[:maxInstance]
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", e.node, now.UnixNano()),
			Namespace: metav1.NamespaceDefault,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: eventsController,
		ReportingInstance:   instance,
		Action:              action,
		Reason:              reason,
		Type:                eventType,
		Note:                note,
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: e.node, UID: types.UID(e.node)},
	}
}

// write creates the queued Events, in order, until the queue is closed.
func (e *nodeEvents) write() {
	defer close(e.done)
	for ev := range e.queue {
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		err := e.w.Create(ctx, ev)
		cancel()
		if err != nil {
			log.Error(err, "record event", "node", e.node, "reason", ev.Reason, "note", ev.Note)
		}
	}
}

// close stops taking Events and waits until those queued are written or
// ctx ends.
func (e *nodeEvents) close(ctx context.Context) {
	if e == nil {
		return
	}
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.queue)
	}
	e.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
	}
}
