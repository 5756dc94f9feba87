package cniservertest

import (
	"context"
	"errors"
	"testing"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

func TestBackend(t *testing.T) {
	b := NewBackend()
	c := context.Background()
	a := cniserver.Attachment{ContainerID: "0123456789abcdef", IfName: "eth0", Netns: "/var/run/netns/x"}
	r1, err := b.Add(c, a)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Add(c, cniserver.Attachment{ContainerID: "other", IfName: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.GetIps()[0].GetAddress() != "10.244.0.2/32" || r2.GetIps()[0].GetAddress() != "10.244.0.3/32" {
		t.Fatalf("addresses = %v, %v; want consecutive", r1.GetIps(), r2.GetIps())
	}
	if got := r1.GetInterfaces()[0].GetName(); len(got) > 15 {
		t.Fatalf("host interface name %q is too long", got)
	}
	if err := b.Check(c, a, endpointstore.Endpoint{}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for range 2 {
		if err := b.Del(c, a); err != nil {
			t.Fatalf("Del: %v", err)
		}
	}
	if b.Attached(a.ContainerID, a.IfName) || b.Check(c, a, endpointstore.Endpoint{}) == nil {
		t.Fatal("attachment survived Del")
	}
	if err := b.Ready(c); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	b.SetNotReady(errors.New("booting"))
	if err := b.Ready(c); err == nil || err.Error() != "booting" {
		t.Fatalf("Ready = %v, want booting", err)
	}
	if adds, dels := b.Calls(); adds != 2 || dels != 2 {
		t.Fatalf("Calls = %d, %d", adds, dels)
	}
}
