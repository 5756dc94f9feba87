package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/estuary-cni/estuary/internal/lab/proc"
)

// RestartAPIServer kills the running lab's kube-apiserver with SIGKILL, as a
// crash would, waits until it is gone, and starts it again with the same
// arguments, returning once it answers /readyz. Fault tests use it.
func (l *Lab) RestartAPIServer(ctx context.Context) error {
	st, err := loadState(l.paths.StateFile())
	if err != nil {
		return err
	}
	if st.Phase != "running" {
		return fmt.Errorf("the lab is %s, not running", st.Phase)
	}
	const name = "kube-apiserver"
	pid := proc.ReadPID(filepath.Join(l.paths.Run(), name+".pid"))
	if pid <= 1 || !proc.Alive(pid) {
		return fmt.Errorf("no running %s (pid file %s)", name, filepath.Join(l.paths.Run(), name+".pid"))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", name, pid, err)
	}
	if err := waitGone(ctx, pid); err != nil {
		return fmt.Errorf("%s (pid %d): %w", name, pid, err)
	}
	api, err := l.start(l.spec(name, cgroupOf("control-plane"), l.plan.ControlPlane.NetNS, l.apiserverArgs(st.BinDir)...))
	if err != nil {
		return err
	}
	client, err := l.adminClient()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", st.HostAPIPort)
	return api.WaitReady(ctx, "ready", func() error { return httpOK(client, url) })
}

// waitGone waits until pid no longer runs.
func waitGone(ctx context.Context, pid int) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for proc.Alive(pid) {
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("still running"), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}
