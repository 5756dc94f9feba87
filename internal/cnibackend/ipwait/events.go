package ipwait

import (
	"context"
	"fmt"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagerController is the reportingController of the manager's events.
const ManagerController = "estuary-manager"

// ManagerEvents returns a Diagnose that reads the newest event the manager
// recorded about the pod (events.k8s.io, selected by the server on
// regarding.name and regarding.uid) from r, which should be a live client:
// the node does not cache events.
func ManagerEvents(r client.Reader) Diagnose {
	return func(ctx context.Context, namespace, pod, uid string) string {
		var list eventsv1.EventList
		sel := client.MatchingFields{"regarding.name": pod}
		if uid != "" {
			sel["regarding.uid"] = uid
		}
		if err := r.List(ctx, &list, client.InNamespace(namespace), sel); err != nil {
			return fmt.Sprintf("the manager's events for it could not be read: %v", err)
		}
		var newest *eventsv1.Event
		for i := range list.Items {
			e := &list.Items[i]
			if e.ReportingController == ManagerController && (newest == nil || eventTime(e).After(eventTime(newest))) {
				newest = e
			}
		}
		if newest == nil {
			return ManagerController + " recorded no event for it"
		}
		return fmt.Sprintf("%s's last event for it: %s %s: %s", ManagerController, newest.Type, newest.Reason, newest.Note)
	}
}

// eventTime is when the event last happened.
func eventTime(e *eventsv1.Event) time.Time {
	t := e.EventTime.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.DeprecatedLastTimestamp.After(t) {
		t = e.DeprecatedLastTimestamp.Time
	}
	return t
}
