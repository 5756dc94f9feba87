package faultinject

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
