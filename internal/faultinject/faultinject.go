// Package faultinject owns the faults estuary's components can be told to
// inject for fault testing: into the manager's API client, writes that the
// API server stores but whose answers never reach the manager, as when a
// connection drops after the write (LoseAnswers); into the daemon's
// data-path loop, passes that fail or hang while a file says so
// (DataPathFault). Nothing here is on unless a flag asks for it, and the
// flags exist only in binaries built with BuildTag: the lab's, whose fault
// tests use them; a release's manager and daemon link none of this.
package faultinject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// BuildTag is the build tag that gives estuary-manager (--fault-lose-answers)
// and estuary-daemon (--fault-datapath-file) their fault flags.
const BuildTag = "faultinject"

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

// ErrInjectedPass is the error of a data-path pass DataPathFault fails.
var ErrInjectedPass = errors.New("injected fault: data-path pass failed")

// hangWord is what DataPathFault's file holds to make passes hang.
const hangWord = "hang"

// hangPoll is how often a hung pass looks at the file again.
const hangPoll = 100 * time.Millisecond

// DataPathFault is the daemon's data-path fault (estuary-daemon
// --fault-datapath-file): while the file at Path exists, every pass of the
// data-path loop fails, and while it holds "hang", every pass blocks until
// the file is removed or holds something else. The file can be written
// and removed in the daemon's container while it runs, so a test turns the
// fault on and off without restarting it. An empty Path injects nothing.
type DataPathFault struct {
	Path string
}

// Check is the fault's part of a pass: nil while the file is absent.
func (f DataPathFault) Check(ctx context.Context) error {
	if f.Path == "" {
		return nil
	}
	t := time.NewTicker(hangPoll)
	defer t.Stop()
	for {
		b, err := os.ReadFile(f.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("read fault file %s: %w", f.Path, err)
		case !bytes.Equal(bytes.TrimSpace(b), []byte(hangWord)):
			return fmt.Errorf("%w: %s exists", ErrInjectedPass, f.Path)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: hung while %s holds %q: %w", ErrInjectedPass, f.Path, hangWord, ctx.Err())
		case <-t.C:
		}
	}
}
