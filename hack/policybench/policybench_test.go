package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPeerAddr(t *testing.T) {
	cidr := netip.MustParsePrefix("10.240.0.0/16")
	for g, want := range map[int]string{0: "10.240.0.1", 254: "10.240.0.255", 255: "10.240.1.0", 9999: "10.240.39.16"} {
		a, err := peerAddr(cidr, g)
		if err != nil || a.String() != want {
			t.Errorf("peerAddr(%d) = %v, %v; want %s", g, a, err, want)
		}
	}
	if _, err := peerAddr(netip.MustParsePrefix("10.240.0.0/24"), 300); err == nil {
		t.Error("peer 300 of a /24: no error")
	}
}

func TestNetPolicy(t *testing.T) {
	cidr := netip.MustParsePrefix("10.240.0.0/16")
	np := netPolicy("pb-007", 7, 3, cidr)
	if np.Name != "np3" || np.Spec.PodSelector.MatchLabels["app"] != "a3" || len(np.Spec.Ingress) != 2 {
		t.Fatalf("np3 of pb-007: %+v", np.Spec)
	}
	b := np.Spec.Ingress[1].From[0].IPBlock
	if b.CIDR != "10.240.0.0/18" || len(b.Except) != 1 || b.Except[0] != "10.240.7.0/24" {
		t.Errorf("ipBlock %+v", b)
	}
	if np := netPolicy("pb-007", 7, 4, cidr); len(np.Spec.Ingress) != 1 {
		t.Errorf("np4 has %d ingress rules, want 1", len(np.Spec.Ingress))
	}
}

func TestFirstRun(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int, o outcome) attempt {
		return attempt{start: t0.Add(time.Duration(ms) * time.Millisecond), res: o}
	}
	// Out of start order, a lone early drop that is not confirmed, then a run.
	as := []attempt{at(50, dropped), at(0, admitted), at(10, dropped), at(20, admitted), at(40, dropped), at(30, dropped)}
	got, ok := firstRun(as, dropped, 3)
	if !ok || !got.Equal(t0.Add(30*time.Millisecond)) {
		t.Errorf("firstRun = %v, %v; want the attempt at 30 ms", got.Sub(t0), ok)
	}
	if _, ok := firstRun(as, admitted, 2); ok {
		t.Error("two consecutive admits found where there are none")
	}
}

func TestTargetList(t *testing.T) {
	var l targetList
	if err := l.Set("node-1=10.78.1.5:8080"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"10.78.1.5:8080", "n=10.78.1.5", "=1.2.3.4:1"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q): no error", bad)
		}
	}
	if l.String() != "node-1=10.78.1.5:8080" {
		t.Errorf("String() = %q", l.String())
	}
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for err, want := range map[error]bool{
		io.ErrUnexpectedEOF:                                                    true,
		apierrors.NewTooManyRequests("slow down", 1):                           true,
		apierrors.NewInternalError(errors.New("boom")):                         true,
		apierrors.NewServiceUnavailable("etcd"):                                true,
		apierrors.NewAlreadyExists(gr, "p00"):                                  false,
		apierrors.NewBadRequest("bad"):                                         false,
		apierrors.NewNotFound(gr, "p00"):                                       false,
		fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF):                         true,
		fmt.Errorf("w: %w", apierrors.NewForbidden(gr, "p", errors.New("no"))): false,
	} {
		if got := transient(err); got != want {
			t.Errorf("transient(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestRetry(t *testing.T) {
	calls := 0
	err := retry(context.Background(), func() error {
		calls++
		if calls < 2 {
			return io.ErrUnexpectedEOF
		}
		return ignoreExists(apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, "p00"))
	})
	if err != nil || calls != 2 {
		t.Errorf("retry: %v after %d calls, want nil after 2", err, calls)
	}
	calls = 0
	err = retry(context.Background(), func() error { calls++; return apierrors.NewBadRequest("bad") })
	if !apierrors.IsBadRequest(err) || calls != 1 {
		t.Errorf("retry of a bad request: %v after %d calls, want it after 1", err, calls)
	}
}
