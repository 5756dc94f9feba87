package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bootstrap"
)

// warnings records the first Warning event a Creator reports.
type warnings struct {
	once  sync.Once
	first chan string
}

func (w *warnings) Eventf(_, _ runtime.Object, eventtype, _, _, note string, args ...any) {
	if eventtype == "Warning" {
		w.once.Do(func() { w.first <- fmt.Sprintf(note, args...) })
	}
}

// TestBootstrapThroughWebhook: the bootstrap objects pass the webhook like
// any other write. A Subnet the webhook refuses (it overlaps one that
// exists) is retried, with a Warning quoting the denial, and created once
// the conflict is gone.
func TestBootstrapThroughWebhook(t *testing.T) {
	blocker := subnetObj("bs-blocker", "bs-other", "10.60.0.0/16")
	seed(t, overlayNet("bs-ov"), underlayNet("bs-other", vlan, sel("rack", "bs")))
	blocker.Spec.Range.Gateway = "10.60.0.1"
	seed(t, blocker)
	objs, err := bootstrap.Decode([]byte(`apiVersion: networking.estuary.io/v1
kind: Subnet
metadata: {name: bs-default}
spec:
  network: bs-ov
  range: {version: 4, cidr: 10.60.0.0/16}
`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		remove(t, &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "bs-default"}})
	})
	ev := &warnings{first: make(chan string, 1)}
	c := &bootstrap.Creator{Client: k8s, Reader: k8s, Objects: objs, Events: ev, Log: testr.New(t),
		Backoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	runCtx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = c.Start(runCtx)
	}()
	t.Cleanup(func() { cancel(); <-stopped })

	select {
	case note := <-ev.first:
		for _, want := range []string{"Subnet bs-default", "overlaps", "bs-blocker"} {
			if !strings.Contains(note, want) {
				t.Errorf("Warning %q does not say %q", note, want)
			}
		}
	case <-ctx(t).Done():
		t.Fatal("no Warning while the webhook refuses the Subnet")
	}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "bs-default"}, &estuaryv1.Subnet{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Subnet bs-default exists although the webhook refuses it: %v", err)
	}
	remove(t, blocker)
	select {
	case <-c.Done():
	case <-ctx(t).Done():
		t.Fatal("Subnet bs-default not created once the conflict was gone")
	}
	if err := k8s.Get(ctx(t), client.ObjectKey{Name: "bs-default"}, &estuaryv1.Subnet{}); err != nil {
		t.Fatalf("Subnet bs-default: %v", err)
	}
}
