//go:build integration

package integration

import (
	"sync"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// logTail keeps the last part of the controllers' and the daemon's log, so
// a benchmark's output holds only its results unless it fails.
type logTail struct {
	mu  sync.Mutex
	buf []byte
}

const logTailMax = 256 << 10

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if len(l.buf) > 2*logTailMax {
		l.buf = append(l.buf[:0], l.buf[len(l.buf)-logTailMax:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

var (
	benchLog     = &logTail{}
	benchLogOnce sync.Once
)

// quietLogs sends controller-runtime's log (the manager's and the daemon's)
// to benchLog and prints it if tb fails. controller-runtime takes only the
// first logger it is given, so this is done once per process.
func quietLogs(tb testing.TB) {
	tb.Helper()
	benchLogOnce.Do(func() {
		ctrl.SetLogger(zap.New(zap.WriteTo(benchLog), zap.UseDevMode(true)))
	})
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("end of the manager's and the daemon's log:\n%s", benchLog)
		}
	})
}

// benchDaemon is startDaemon for a benchmark: daemon.Run until tb ends,
// with an error if it does not stop cleanly.
func benchDaemon(tb testing.TB, cfg daemon.Config) {
	tb.Helper()
	stop := startDaemon(tb, cfg)
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Errorf("daemon stopped with %v", err)
		}
	})
}
