package bgp

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/go-logr/logr"
)

// stopFailedMsg is what GoBGP's BgpServer.Stop logs when the BGP instance
// was already stopped, which Speaker.Stop does first on purpose (graceful
// restart); see releaseServer.
const stopFailedMsg = "failed to stop BGP server"

// gobgpLog hands GoBGP's slog records to a logr.Logger, dropping the one
// misleading error of a clean stop once the speaker is shutting down.
type gobgpLog struct {
	slog.Handler
	stopping *atomic.Bool
}

func newGobgpLog(l logr.Logger) (*slog.Logger, *atomic.Bool) {
	stopping := &atomic.Bool{}
	return slog.New(gobgpLog{Handler: logr.ToSlogHandler(l), stopping: stopping}), stopping
}

// Handle implements slog.Handler.
func (h gobgpLog) Handle(ctx context.Context, r slog.Record) error {
	if h.stopping.Load() && r.Message == stopFailedMsg {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h gobgpLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return gobgpLog{Handler: h.Handler.WithAttrs(attrs), stopping: h.stopping}
}

// WithGroup implements slog.Handler.
func (h gobgpLog) WithGroup(name string) slog.Handler {
	return gobgpLog{Handler: h.Handler.WithGroup(name), stopping: h.stopping}
}
