package cniserver_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
)

func TestInvalidRequestsChangeNothing(t *testing.T) {
	f := newFixture(t)
	mutate := func(m func(a *cniv1.CmdArgs)) *cniv1.CmdArgs {
		a := args("c1")
		m(a)
		return a
	}
	cases := []struct {
		name  string
		args  *cniv1.CmdArgs
		field string
	}{
		{"missing args", nil, "args"},
		{"empty container", mutate(func(a *cniv1.CmdArgs) { a.ContainerId = "" }), "args.container_id"},
		{"container with slash", mutate(func(a *cniv1.CmdArgs) { a.ContainerId = "a/b" }), "args.container_id"},
		{"container starting with dash", mutate(func(a *cniv1.CmdArgs) { a.ContainerId = "-a" }), "args.container_id"},
		{"container longer than a veth alias holds", mutate(func(a *cniv1.CmdArgs) { a.ContainerId = strings.Repeat("c", 129) }), "args.container_id"},
		{"netns with a newline", mutate(func(a *cniv1.CmdArgs) { a.Netns = "/var/run/netns/x\ny" }), "args.netns"},
		{"relative netns", mutate(func(a *cniv1.CmdArgs) { a.Netns = "var/run/netns/x" }), "args.netns"},
		{"empty netns", mutate(func(a *cniv1.CmdArgs) { a.Netns = "" }), "args.netns"},
		{"empty ifname", mutate(func(a *cniv1.CmdArgs) { a.Ifname = "" }), "args.ifname"},
		{"long ifname", mutate(func(a *cniv1.CmdArgs) { a.Ifname = "eth0123456789abc" }), "args.ifname"},
		{"ifname with slash", mutate(func(a *cniv1.CmdArgs) { a.Ifname = "eth/0" }), "args.ifname"},
		{"ifname dotdot", mutate(func(a *cniv1.CmdArgs) { a.Ifname = ".." }), "args.ifname"},
		{"ifname with space", mutate(func(a *cniv1.CmdArgs) { a.Ifname = "eth 0" }), "args.ifname"},
		{"pod name too long", mutate(func(a *cniv1.CmdArgs) { a.Pod.Name = strings.Repeat("a", 300) }), "args.pod.name"},
		{"config too large", mutate(func(a *cniv1.CmdArgs) { a.NetworkConfig = make([]byte, 2<<20) }), "args.network_config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: tc.args})
			wantCode(t, err, codes.InvalidArgument, tc.field+":")
			_, err = f.client.Check(ctx(t), &cniv1.CheckRequest{Args: tc.args})
			wantCode(t, err, codes.InvalidArgument, tc.field+":")
		})
	}
	_, err := f.client.Status(ctx(t), &cniv1.StatusRequest{NetworkConfig: make([]byte, 2<<20)})
	wantCode(t, err, codes.InvalidArgument, "network_config:")
	_, err = f.client.GC(ctx(t), &cniv1.GCRequest{ValidAttachments: []*cniv1.Attachment{{ContainerId: "ok", Ifname: "eth0"}, {ContainerId: "ok"}}})
	wantCode(t, err, codes.InvalidArgument, "valid_attachments[1].ifname:")

	if list, _ := f.srv.Store().List(); len(list) != 0 {
		t.Fatalf("invalid requests wrote records: %+v", list)
	}
	if adds, dels := f.backend.Calls(); adds != 0 || dels != 0 {
		t.Fatalf("invalid requests reached the backend: %d adds, %d dels", adds, dels)
	}
}

func TestDelAllowsEmptyNetnsButNotRelative(t *testing.T) {
	f := newFixture(t)
	a := args("c1")
	a.Netns = ""
	if _, err := f.client.Del(ctx(t), &cniv1.DelRequest{Args: a}); err != nil {
		t.Fatalf("Del with empty netns: %v", err)
	}
	a.Netns = "relative"
	_, err := f.client.Del(ctx(t), &cniv1.DelRequest{Args: a})
	wantCode(t, err, codes.InvalidArgument, "args.netns:")
}
