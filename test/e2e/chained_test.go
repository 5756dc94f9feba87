//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The chained plugin TestChainedTuningPluginSetsSysctl configures: the
// reference tuning plugin, which the daemon image ships and installs,
// setting a namespaced sysctl of the pod's eth0 whose default is 0.
const (
	chainedTuning = `[{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.accept_local":"1"}}]`
	tunedSysctl   = "/proc/sys/net/ipv4/conf/eth0/accept_local"
)

// TestChainedTuningPluginSetsSysctl: `helm upgrade` with
// daemon.cniChainedPlugins naming the tuning plugin rolls the daemons, and
// every node's conflist then lists tuning after estuary's plugins; a new
// pod's eth0 has the sysctl tuning sets (which needs estuary's CNI result,
// passed to tuning as prevResult by containerd, to name the pod's
// interface). Upgrading back to the lab's values removes tuning from every
// conflist, and a new pod has the kernel's default again.
func TestChainedTuningPluginSetsSysctl(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "chained")
	restored := false
	t.Cleanup(func() {
		if !restored {
			e.helmInstallAgain(t)
		}
	})
	e.helmInstallAgain(t, "--set-json", "daemon.cniChainedPlugins="+chainedTuning)
	e.waitConflists(t, true)
	e.mustCreate(t, ns, netexecPod("tuned", "node-1", nil))
	e.waitPods(t, ns, "tuned")
	if got := e.podSysctl(t, ns, "tuned"); got != "1" {
		t.Errorf("%s in a pod with tuning chained = %q, want 1", tunedSysctl, got)
	}

	e.helmInstallAgain(t)
	restored = true
	e.waitConflists(t, false)
	e.mustCreate(t, ns, netexecPod("untuned", "node-1", nil))
	e.waitPods(t, ns, "untuned")
	if got := e.podSysctl(t, ns, "untuned"); got != "0" {
		t.Errorf("%s in a pod after tuning was unchained = %q, want the default 0", tunedSysctl, got)
	}
}

// waitConflists waits until the conflist of every node lists the tuning
// plugin last (chained) or not at all.
func (e *labEnv) waitConflists(t *testing.T, chained bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("every node's conflist with tuning chained: %v", chained), 2*time.Minute, func(ctx context.Context) error {
		for _, node := range []string{"node-1", "node-2", "node-3"} {
			out, err := e.run(ctx, node, "cat", cniConflist)
			if err != nil {
				return err
			}
			if strings.Contains(out, `"tuning"`) != chained {
				return fmt.Errorf("%s: %s:\n%s", node, cniConflist, out)
			}
		}
		return nil
	})
}

// podSysctl reads tunedSysctl inside the pod.
func (e *labEnv) podSysctl(t *testing.T, ns, pod string) string {
	t.Helper()
	out, err := e.podExec(testCtx(t, time.Minute), ns, pod, "cat", tunedSysctl)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
