package cniserver_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

func dial(tb testing.TB, socket string) cniv1.CNIClient {
	tb.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatalf("dial %s: %v", socket, err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return cniv1.NewCNIClient(conn)
}

type fixture struct {
	backend *cniservertest.Backend
	srv     *cniserver.Server
	client  cniv1.CNIClient
	socket  string
	state   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{backend: cniservertest.NewBackend()}
	f.socket, f.state = cniservertest.Paths(t)
	f.srv = cniservertest.Start(t, f.backend, f.socket, f.state)
	f.client = dial(t, f.socket)
	return f
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func args(id string) *cniv1.CmdArgs {
	return &cniv1.CmdArgs{
		ContainerId:   id,
		Netns:         "/var/run/netns/" + id,
		Ifname:        "eth0",
		Pod:           &cniv1.PodRef{Namespace: "default", Name: "web-" + id, Uid: "uid-" + id},
		NetworkConfig: []byte(`{"cniVersion":"1.1.0","name":"estuary","type":"estuary"}`),
	}
}

func wantCode(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(err.Error(), substr) {
		t.Fatalf("error = %v, want %s containing %q", err, code, substr)
	}
}

func TestSocketIsRootOnlyAndReplacesStale(t *testing.T) {
	socket, state := cniservertest.Paths(t)
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = stale.Close()

	cniservertest.Start(t, cniservertest.NewBackend(), socket, state)
	info, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Type() != fs.ModeSocket || info.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, want socket with 0600", info.Mode())
	}
	if _, err := dial(t, socket).Status(ctx(t), &cniv1.StatusRequest{}); err != nil {
		t.Fatalf("Status over replaced socket: %v", err)
	}
}

func TestRefusesNonSocketAtPath(t *testing.T) {
	socket, state := cniservertest.Paths(t)
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(socket, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := cniserver.New(cniserver.Config{SocketPath: socket, StatePath: state, Backend: cniservertest.NewBackend()})
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("New = %v, want a not-a-socket error", err)
	}
	if b, _ := os.ReadFile(socket); string(b) != "keep me" {
		t.Fatal("regular file at the socket path was changed")
	}
}

func TestAddRecordsBeforeReplyAndIsIdempotent(t *testing.T) {
	f := newFixture(t)
	reply, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")})
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	if len(reply.GetIps()) != 1 || reply.GetIps()[0].GetAddress() != "10.244.0.2/32" {
		t.Fatalf("Add reply IPs = %v", reply.GetIps())
	}
	ep, err := f.srv.Store().Get(endpointstore.Key{ContainerID: "c1", IfName: "eth0"})
	if err != nil {
		t.Fatalf("record after Add: %v", err)
	}
	if ep.Netns != "/var/run/netns/c1" || ep.PodName != "web-c1" || ep.IPs[0] != "10.244.0.2/32" {
		t.Fatalf("record = %+v", ep)
	}
	again, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")})
	if err != nil || again.GetIps()[0].GetAddress() != "10.244.0.2/32" {
		t.Fatalf("repeated Add = %v, %v; want the recorded result", again, err)
	}
	if adds, _ := f.backend.Calls(); adds != 1 {
		t.Fatalf("backend Add calls = %d, want 1", adds)
	}
}

// TestAddRecordsShapedAttachments: an ADD whose configuration carries a
// bandwidth rate in runtimeConfig (the bandwidth capability) is recorded as
// shaped; without one, or with zero rates, it is not.
func TestAddRecordsShapedAttachments(t *testing.T) {
	f := newFixture(t)
	for i, c := range []struct {
		runtimeConfig string
		want          bool
	}{
		{``, false},
		{`,"runtimeConfig":{"portMappings":[]}`, false},
		{`,"runtimeConfig":{"bandwidth":{"ingressRate":0,"egressRate":0}}`, false},
		{`,"runtimeConfig":{"bandwidth":{"ingressRate":20000000,"ingressBurst":4294967295}}`, true},
		{`,"runtimeConfig":{"bandwidth":{"egressRate":1000000,"egressBurst":4294967295}}`, true},
	} {
		a := args(fmt.Sprintf("shaped%d", i))
		a.NetworkConfig = []byte(`{"cniVersion":"1.1.0","name":"estuary","type":"estuary"` + c.runtimeConfig + `}`)
		if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: a}); err != nil {
			t.Fatalf("Add with %s: %v", a.NetworkConfig, err)
		}
		ep, err := f.srv.Store().Get(endpointstore.Key{ContainerID: a.ContainerId, IfName: "eth0"})
		if err != nil || ep.Shaped != c.want {
			t.Errorf("record of Add with %s: shaped %v, %v; want %v", a.NetworkConfig, ep.Shaped, err, c.want)
		}
	}
}

func TestAddBackendFailureWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.backend.FailAdd = errors.New("no address available")
	_, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")})
	wantCode(t, err, codes.Internal, "no address available")
	if list, _ := f.srv.Store().List(); len(list) != 0 {
		t.Fatalf("records after failed Add: %+v", list)
	}
}

func TestDelIsIdempotent(t *testing.T) {
	f := newFixture(t)
	if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatal(err)
	}
	gone := args("c1")
	gone.Netns = "" // the runtime may pass no netns once it is gone
	for i := range 2 {
		if _, err := f.client.Del(ctx(t), &cniv1.DelRequest{Args: gone}); err != nil {
			t.Fatalf("Del #%d: %v", i+1, err)
		}
	}
	if _, err := f.client.Del(ctx(t), &cniv1.DelRequest{Args: args("never-added")}); err != nil {
		t.Fatalf("Del of unknown container: %v", err)
	}
	if list, _ := f.srv.Store().List(); len(list) != 0 || f.backend.Attached("c1", "eth0") {
		t.Fatalf("after Del: records %+v, backend attached %v", list, f.backend.Attached("c1", "eth0"))
	}
}

func TestDelBackendFailureKeepsRecord(t *testing.T) {
	f := newFixture(t)
	if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatal(err)
	}
	f.backend.FailDel = status.Error(codes.Unavailable, "netlink busy")
	_, err := f.client.Del(ctx(t), &cniv1.DelRequest{Args: args("c1")})
	wantCode(t, err, codes.Unavailable, "netlink busy")
	if _, err := f.srv.Store().Get(endpointstore.Key{ContainerID: "c1", IfName: "eth0"}); err != nil {
		t.Fatalf("record after failed Del: %v", err)
	}
}

func TestCheck(t *testing.T) {
	f := newFixture(t)
	reply, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Check(ctx(t), &cniv1.CheckRequest{Args: args("c1"), PrevResult: reply}); err != nil {
		t.Fatalf("Check of fresh endpoint: %v", err)
	}
	moved := args("c1")
	moved.Netns = "/var/run/netns/other"
	_, err = f.client.Check(ctx(t), &cniv1.CheckRequest{Args: moved})
	wantCode(t, err, codes.FailedPrecondition, `netns is "/var/run/netns/other", recorded "/var/run/netns/c1"`)

	reply.Ips[0].Address = "10.244.9.9/32"
	_, err = f.client.Check(ctx(t), &cniv1.CheckRequest{Args: args("c1"), PrevResult: reply})
	wantCode(t, err, codes.FailedPrecondition, "prevResult IPs are [10.244.9.9/32], recorded [10.244.0.2/32]")

	_, err = f.client.Check(ctx(t), &cniv1.CheckRequest{Args: args("c2")})
	wantCode(t, err, codes.NotFound, "c2/eth0")
}

func TestStatus(t *testing.T) {
	f := newFixture(t)
	st, err := f.client.Status(ctx(t), &cniv1.StatusRequest{})
	if err != nil || !st.GetReady() {
		t.Fatalf("Status = %v, %v; want ready", st, err)
	}
	f.backend.SetNotReady(errors.New("waiting for node VTEP"))
	st, err = f.client.Status(ctx(t), &cniv1.StatusRequest{})
	if err != nil || st.GetReady() || st.GetMessage() != "waiting for node VTEP" {
		t.Fatalf("Status = %v, %v; want not ready with the reason", st, err)
	}
}

func TestGCRemovesStale(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"keep", "drop1", "drop2"} {
		if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args(id)}); err != nil {
			t.Fatal(err)
		}
	}
	reply, err := f.client.GC(ctx(t), &cniv1.GCRequest{ValidAttachments: []*cniv1.Attachment{{ContainerId: "keep", Ifname: "eth0"}}})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if len(reply.GetRemoved()) != 2 {
		t.Fatalf("GC removed %v, want drop1 and drop2", reply.GetRemoved())
	}
	list, _ := f.srv.Store().List()
	if len(list) != 1 || list[0].ContainerID != "keep" {
		t.Fatalf("records after GC: %+v", list)
	}
	if f.backend.Attached("drop1", "eth0") || !f.backend.Attached("keep", "eth0") {
		t.Fatal("GC did not delete stale attachments through the backend")
	}
}

// GC names its network: attachments added under another network's
// configuration are not its to remove, and a configuration that is not
// JSON is refused with nothing removed.
func TestGCHonoursTheNetworkName(t *testing.T) {
	f := newFixture(t)
	other := args("other-net")
	other.NetworkConfig = []byte(`{"cniVersion":"1.1.0","name":"storage","type":"estuary"}`)
	for _, a := range []*cniv1.CmdArgs{args("mine"), other} {
		if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: a}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.client.GC(ctx(t), &cniv1.GCRequest{NetworkConfig: []byte("{name: estuary")})
	wantCode(t, err, codes.InvalidArgument, "network_config")
	if list, _ := f.srv.Store().List(); len(list) != 2 {
		t.Fatalf("a refused GC changed the records: %+v", list)
	}
	reply, err := f.client.GC(ctx(t), &cniv1.GCRequest{NetworkConfig: []byte(`{"cniVersion":"1.1.0","name":"estuary","type":"estuary"}`)})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	if len(reply.GetRemoved()) != 1 || reply.GetRemoved()[0].GetContainerId() != "mine" {
		t.Fatalf("GC of network estuary removed %v, want only mine", reply.GetRemoved())
	}
	if !f.backend.Attached("other-net", "eth0") {
		t.Fatal("GC of network estuary removed an attachment of network storage")
	}
}

// An Add for an endpoint rebuilt from the kernel (no recorded reply) asks
// the backend again and records its reply.
func TestAddOfRecoveredEndpointAnswers(t *testing.T) {
	f := newFixture(t)
	a := args("c1")
	if err := f.srv.Store().Put(endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c1", IfName: "eth0"}, Netns: a.Netns, Recovered: true,
		IPs: []string{"10.0.0.1/32"}}); err != nil {
		t.Fatal(err)
	}
	reply, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: a})
	if err != nil || len(reply.GetIps()) == 0 {
		t.Fatalf("Add of a recovered endpoint: %v, %v", reply, err)
	}
	ep, err := f.srv.Store().Get(endpointstore.Key{ContainerID: "c1", IfName: "eth0"})
	if err != nil || ep.Recovered || len(ep.Result) == 0 || ep.Network != "estuary" {
		t.Fatalf("record after Add: %+v, %v", ep, err)
	}
}

func TestRestartSeesPreviousEndpoints(t *testing.T) {
	backend := cniservertest.NewBackend()
	socket, state := cniservertest.Paths(t)
	srv, err := cniserver.New(cniserver.Config{SocketPath: socket, StatePath: state, Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	if _, err := dial(t, socket).Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(socket); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("socket after Close: %v, want removed", err)
	}

	srv2 := cniservertest.Start(t, backend, socket, state)
	if list, _ := srv2.Store().List(); len(list) != 1 || list[0].ContainerID != "c1" {
		t.Fatalf("endpoints after restart: %+v", list)
	}
	if _, err := dial(t, socket).Check(ctx(t), &cniv1.CheckRequest{Args: args("c1")}); err != nil {
		t.Fatalf("Check after restart: %v", err)
	}
}

func TestOnChangeFollowsStoreChanges(t *testing.T) {
	backend := cniservertest.NewBackend()
	socket, state := cniservertest.Paths(t)
	var changes atomic.Int32
	srv := cniservertest.StartConfig(t, cniserver.Config{SocketPath: socket, StatePath: state, Backend: backend,
		OnChange: func() { changes.Add(1) }})
	client := dial(t, socket)
	want := func(n int32, after string) {
		t.Helper()
		if got := changes.Load(); got != n {
			t.Fatalf("after %s: OnChange called %d times, want %d", after, got, n)
		}
	}
	if _, err := client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	want(1, "Add")
	if _, err := client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatalf("repeated Add: %v", err)
	}
	want(1, "a repeated Add that changes nothing")
	if _, err := client.Add(ctx(t), &cniv1.AddRequest{Args: args("c2")}); err != nil {
		t.Fatalf("Add c2: %v", err)
	}
	if _, err := client.Del(ctx(t), &cniv1.DelRequest{Args: args("c1")}); err != nil {
		t.Fatalf("Del: %v", err)
	}
	want(3, "Add c2 and Del c1")
	if _, err := client.GC(ctx(t), &cniv1.GCRequest{}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	want(4, "GC removing c2")
	if eps, err := srv.Store().List(); err != nil || len(eps) != 0 {
		t.Fatalf("store after GC = %v, %v; want empty", eps, err)
	}
}

// gatedBackend blocks each Add and Del until release is closed.
type gatedBackend struct {
	*cniservertest.Backend
	entered chan struct{}
	release chan struct{}
}

func (g *gatedBackend) Add(ctx context.Context, a cniserver.Attachment) (*cniv1.AddReply, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Backend.Add(ctx, a)
}

func (g *gatedBackend) Del(ctx context.Context, a cniserver.Attachment) error {
	g.entered <- struct{}{}
	<-g.release
	return g.Backend.Del(ctx, a)
}

// TestBusyListsAttachmentsInFlight: an attachment is busy from the moment
// its Add or Del reaches the server until its record is written or removed,
// and not before or after.
func TestBusyListsAttachmentsInFlight(t *testing.T) {
	g := &gatedBackend{Backend: cniservertest.NewBackend(), entered: make(chan struct{}), release: make(chan struct{})}
	socket, state := cniservertest.Paths(t)
	srv := cniservertest.Start(t, g, socket, state)
	client := dial(t, socket)
	key := endpointstore.Key{ContainerID: "c1", IfName: "eth0"}
	if b := srv.Busy(); len(b) != 0 {
		t.Fatalf("busy before any request: %v", b)
	}
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"add", func() error { _, err := client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); return err }},
		{"del", func() error { _, err := client.Del(ctx(t), &cniv1.DelRequest{Args: args("c1")}); return err }},
	} {
		done := make(chan error, 1)
		go func() { done <- op.call() }()
		<-g.entered
		if b := srv.Busy(); len(b) != 1 || b[0] != key {
			t.Errorf("%s in the backend: busy = %v, want [%v]", op.name, b, key)
		}
		g.release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if b := srv.Busy(); len(b) != 0 {
			t.Errorf("after %s: busy = %v", op.name, b)
		}
	}
}
