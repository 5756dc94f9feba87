package cnibackend

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

// TestThroughServer runs the backend behind the real CNI server: ADD is
// recorded, CHECK with the runtime's prevResult passes against the record and
// the kernel, DEL removes the interface.
func TestThroughServer(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "served", "eth0", addr("10.0.0.31/24"))
	socket, statePath := cniservertest.Paths(t)
	cniservertest.Start(t, e.b, socket, statePath)
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := cniv1.NewCNIClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := &cniv1.CmdArgs{ContainerId: a.ContainerID, Netns: a.Netns, Ifname: a.IfName,
		Pod: &cniv1.PodRef{Namespace: a.PodNamespace, Name: a.PodName, Uid: a.PodUID}}

	reply, err := client.Add(ctx, &cniv1.AddRequest{Args: args})
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	t.Cleanup(func() { _ = e.b.Del(context.Background(), a) })
	ping(t, e.host, "10.0.0.31", podNS)
	if _, err := client.Check(ctx, &cniv1.CheckRequest{Args: args, PrevResult: reply}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	ipCmd(t, podNS, "neigh", "flush", "dev", "eth0", "nud", "permanent")
	_, err = client.Check(ctx, &cniv1.CheckRequest{Args: args, PrevResult: reply})
	if err == nil || !strings.Contains(err.Error(), "neighbour 169.254.1.1 lladdr ee:ee:ee:ee:ee:ee dev eth0 missing") {
		t.Fatalf("Check after flushing the gateway entry = %v", err)
	}
	if _, err := client.Del(ctx, &cniv1.DelRequest{Args: args}); err != nil {
		t.Fatalf("Del: %v", err)
	}
	if out := hostLinks(t, e.host); strings.Contains(out, hostVeth(a)) {
		t.Errorf("host veth left after Del:\n%s", out)
	}
}
