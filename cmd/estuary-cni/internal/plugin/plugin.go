package plugin

import (
	"context"
	"fmt"
	"io"
	"net"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
)

// Plugin implements the CNI verbs by forwarding them to the daemon.
type Plugin struct {
	// Stdout receives ADD's result.
	Stdout io.Writer
}

// Add asks the daemon to attach the container and prints the result in the
// configuration's CNI version.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	conf, req, err := prepare(args)
	if err != nil {
		return err
	}
	var reply *cniv1.AddReply
	err = call(conf, "ADD", func(ctx context.Context, c cniv1.CNIClient) (err error) {
		reply, err = c.Add(ctx, &cniv1.AddRequest{Args: req})
		return err
	})
	if err != nil {
		return err
	}
	res, err := ToResult(reply)
	if err != nil {
		return types.NewError(types.ErrInternal, "ADD: daemon returned an unusable result", err.Error())
	}
	out, err := res.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("ADD: convert result to %s", conf.CNIVersion), err.Error())
	}
	if err := out.PrintTo(p.Stdout); err != nil {
		return types.NewError(types.ErrIOFailure, "ADD: write result", err.Error())
	}
	return nil
}

// Del asks the daemon to detach the container.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	conf, req, err := prepare(args)
	if err != nil {
		return err
	}
	return call(conf, "DEL", func(ctx context.Context, c cniv1.CNIClient) error {
		_, err := c.Del(ctx, &cniv1.DelRequest{Args: req})
		return err
	})
}

// Check asks the daemon to compare the attachment with its record and with
// the runtime's prevResult.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	conf, req, err := prepare(args)
	if err != nil {
		return err
	}
	if conf.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "CHECK: network configuration has no prevResult", "")
	}
	prev, err := FromResult(conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "CHECK: decode prevResult", err.Error())
	}
	return call(conf, "CHECK", func(ctx context.Context, c cniv1.CNIClient) error {
		_, err := c.Check(ctx, &cniv1.CheckRequest{Args: req, PrevResult: prev})
		return err
	})
}

// Status succeeds when the daemon is reachable and ready.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	var reply *cniv1.StatusReply
	err = call(conf, "STATUS", func(ctx context.Context, c cniv1.CNIClient) (err error) {
		reply, err = c.Status(ctx, &cniv1.StatusRequest{NetworkConfig: args.StdinData})
		return err
	})
	if err != nil {
		return err
	}
	if !reply.GetReady() {
		return types.NewError(types.ErrPluginNotAvailable, "STATUS: estuary daemon is not ready", reply.GetMessage())
	}
	return nil
}

// GC asks the daemon to remove every attachment not in the valid list.
func (p *Plugin) GC(args *skel.CmdArgs) error {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	req := &cniv1.GCRequest{NetworkConfig: args.StdinData}
	for _, a := range conf.ValidAttachments {
		req.ValidAttachments = append(req.ValidAttachments, &cniv1.Attachment{ContainerId: a.ContainerID, Ifname: a.IfName})
	}
	return call(conf, "GC", func(ctx context.Context, c cniv1.CNIClient) error {
		_, err := c.GC(ctx, req)
		return err
	})
}

// prepare parses the configuration and CNI_ARGS of a per-container verb.
func prepare(args *skel.CmdArgs) (*NetConf, *cniv1.CmdArgs, error) {
	conf, err := ParseConfig(args.StdinData)
	if err != nil {
		return nil, nil, err
	}
	pod, err := ParseArgs(args.Args)
	if err != nil {
		return nil, nil, err
	}
	for _, v := range []struct{ name, value string }{
		{"CNI_CONTAINERID", args.ContainerID}, {"CNI_IFNAME", args.IfName}, {"CNI_NETNS", args.Netns},
	} {
		if !utf8.ValidString(v.value) {
			return nil, nil, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("%s %q is not UTF-8: the request to the daemon cannot carry it", v.name, v.value), "")
		}
	}
	return conf, &cniv1.CmdArgs{
		ContainerId:   args.ContainerID,
		Netns:         args.Netns,
		Ifname:        args.IfName,
		Pod:           &cniv1.PodRef{Namespace: pod.Namespace, Name: pod.Name, Uid: pod.UID},
		NetworkConfig: args.StdinData,
	}, nil
}

// call dials the daemon's socket and runs fn under the configured deadline.
func call(conf *NetConf, verb string, fn func(context.Context, cniv1.CNIClient) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), conf.Timeout())
	defer cancel()
	socket := conf.DaemonSocket
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	conn, err := grpc.NewClient("passthrough:///estuary-daemon",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer))
	if err != nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("%s: set up client for %s", verb, socket), err.Error())
	}
	defer func() { _ = conn.Close() }()
	if err := fn(ctx, cniv1.NewCNIClient(conn)); err != nil {
		return rpcError(verb, socket, err, ctx.Err() != nil)
	}
	return nil
}

// rpcError maps a failed call to the CNI error code the runtime acts on.
// expired says whether the plugin's own deadline passed: a deadline error
// without it is the daemon's own (it gave up waiting, e.g. for the pod's
// addresses) and says so.
func rpcError(verb, socket string, err error, expired bool) *types.Error {
	st := status.Convert(err)
	code := types.ErrInternal
	msg := fmt.Sprintf("%s: estuary daemon at %s failed", verb, socket)
	switch st.Code() {
	case codes.Unavailable:
		code, msg = types.ErrTryAgainLater, fmt.Sprintf("%s: estuary daemon at %s is unreachable", verb, socket)
	case codes.DeadlineExceeded, codes.Canceled:
		code, msg = types.ErrTryAgainLater, fmt.Sprintf("%s: estuary daemon at %s did not answer in time", verb, socket)
		if !expired {
			msg = fmt.Sprintf("%s: estuary daemon at %s timed out serving the request", verb, socket)
		}
	case codes.InvalidArgument:
		code, msg = types.ErrInvalidEnvironmentVariables, fmt.Sprintf("%s: estuary daemon at %s rejected the request", verb, socket)
	case codes.NotFound:
		code, msg = types.ErrUnknownContainer, fmt.Sprintf("%s: estuary daemon at %s does not know the container", verb, socket)
	}
	return types.NewError(code, msg, st.Message())
}
