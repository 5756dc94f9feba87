package faultinject

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Every nth write to the named resource reaches the server and its answer
// is lost; reads and other resources are never touched.
func TestLoseAnswersLosesEveryNthWriteAfterItArrives(t *testing.T) {
	var arrived atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			arrived.Add(1)
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	LoseAnswers(cfg, 3, "ipinstances")
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string) error {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	var lost []int
	for i := 1; i <= 9; i++ {
		if err := do(http.MethodPut, "/apis/networking.estuary.io/v1/ipinstances/10.0.0.1"); err != nil {
			if !errors.Is(err, ErrLostAnswer) {
				t.Fatalf("write %d: %v", i, err)
			}
			lost = append(lost, i)
		}
	}
	if len(lost) != 3 || lost[0] != 3 || lost[1] != 6 || lost[2] != 9 {
		t.Errorf("lost writes %v, want 3, 6 and 9", lost)
	}
	if n := arrived.Load(); n != 9 {
		t.Errorf("%d writes reached the server, want all 9 (a lost answer is lost after the write)", n)
	}
	for i := range 6 {
		if err := do(http.MethodGet, "/apis/networking.estuary.io/v1/ipinstances"); err != nil {
			t.Errorf("read %d: %v", i, err)
		}
		if err := do(http.MethodPost, "/api/v1/namespaces/a/events"); err != nil {
			t.Errorf("write %d to another resource: %v", i, err)
		}
	}
}

// n < 1 changes nothing.
func TestLoseAnswersOff(t *testing.T) {
	cfg := &rest.Config{}
	LoseAnswers(cfg, 0, "ipinstances")
	if cfg.WrapTransport != nil {
		t.Fatal("a transport wrapper was installed with n = 0")
	}
}

// DataPathFault injects nothing without its file, fails every pass while
// the file exists, and hangs a pass while the file holds "hang": until the
// pass's context ends, or the file goes, whichever is first.
func TestDataPathFaultFailsAndHangsWhileTheFileSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "datapath-fault")
	f := DataPathFault{Path: path}
	ctx := context.Background()
	if err := (DataPathFault{}).Check(ctx); err != nil {
		t.Fatalf("no path: %v", err)
	}
	if err := f.Check(ctx); err != nil {
		t.Fatalf("no file: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx); !errors.Is(err, ErrInjectedPass) || !strings.Contains(err.Error(), path) {
		t.Fatalf("file present: %v, want %v naming %s", err, ErrInjectedPass, path)
	}
	if err := os.WriteFile(path, []byte("hang\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := f.Check(short); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrInjectedPass) {
		t.Fatalf("hang: %v, want it to block until its context ends", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Check(ctx) }()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("hang released by removing the file: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a hung pass did not return after the file was removed")
	}
}
