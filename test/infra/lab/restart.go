package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/proc"
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
	client, err := l.adminClient()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", st.HostAPIPort)
	for {
		api, err := l.start(l.spec(name, cgroupOf("control-plane"), l.plan.ControlPlane.NetNS, l.apiserverArgs(st.BinDir)...))
		if err != nil {
			return err
		}
		err = api.WaitReady(ctx, "ready", func() error { return httpOK(client, url) })
		if err == nil || !portStillTaken(api) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// portStillTaken: the API server just started has exited because its
// port was not free yet, as happened now and then right after the old one
// was killed with SIGKILL; the restart then tries again.
func portStillTaken(api *proc.Proc) bool {
	return api.Exited() && strings.Contains(proc.Tail(api.Log, 20), "address already in use")
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
