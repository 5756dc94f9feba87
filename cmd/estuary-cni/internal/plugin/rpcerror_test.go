package plugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRPCErrorNamesWhoseDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		expired bool
		code    uint
		msg     string
	}{
		{"daemon gave up", status.Error(codes.DeadlineExceeded, "pod a/b: no addresses within 30s"), false,
			types.ErrTryAgainLater, "timed out serving the request"},
		{"plugin deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true,
			types.ErrTryAgainLater, "did not answer in time"},
		{"unreachable", status.Error(codes.Unavailable, "connection refused"), false,
			types.ErrTryAgainLater, "is unreachable"},
		{"unknown container", status.Error(codes.NotFound, "no endpoint"), false,
			types.ErrUnknownContainer, "does not know the container"},
		{"plain error", errors.New("boom"), false, types.ErrInternal, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := rpcError("ADD", "/run/estuary/cni.sock", tc.err, tc.expired)
			if e.Code != tc.code || !strings.Contains(e.Msg, tc.msg) || !strings.Contains(e.Msg, "/run/estuary/cni.sock") {
				t.Fatalf("error = code %d %q; want code %d and a message containing %q and the socket", e.Code, e.Msg, tc.code, tc.msg)
			}
			if st := status.Convert(tc.err); e.Details != st.Message() {
				t.Fatalf("details = %q, want the daemon's message %q", e.Details, st.Message())
			}
		})
	}
}
