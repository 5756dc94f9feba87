// Package faultinject owns the faults the manager can be told to inject
// into its own API client for fault testing: writes that the API server
// stores but whose answers never reach the manager, as when a connection
// drops after the write. Nothing here is on unless a flag asks for it.
package faultinject

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// LoseAnswers makes every nth write (POST, PUT, PATCH or DELETE) to a
// resource whose path has one of the given segments (e.g. "ipinstances")
// reach the API server, and then fails it as if the answer had been lost:
// the response is read and dropped and the caller gets an error. n < 1
// leaves cfg as it is.
func LoseAnswers(cfg *rest.Config, n int64, resources ...string) {
	if n < 1 {
		return
	}
	lose := &loser{every: n, resources: resources}
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return &lostAnswers{next: rt, loser: lose}
	}
}

// loser counts the writes it may lose; one per rest.Config, shared by every
// transport built from it.
type loser struct {
	every     int64
	resources []string
	writes    atomic.Int64
}

// takes reports whether the answer to req is to be lost.
func (l *loser) takes(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	for _, r := range l.resources {
		if strings.Contains(req.URL.Path, "/"+r) {
			return l.writes.Add(1)%l.every == 0
		}
	}
	return false
}

type lostAnswers struct {
	next  http.RoundTripper
	loser *loser
}

// ErrLostAnswer is the error a lost answer returns.
var ErrLostAnswer = fmt.Errorf("injected fault: the answer was lost after the API server got the request")

func (t *lostAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || !t.loser.takes(req) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return nil, fmt.Errorf("%s %s (answered %d): %w", req.Method, req.URL.Path, resp.StatusCode, ErrLostAnswer)
}
