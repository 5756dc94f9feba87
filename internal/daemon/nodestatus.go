package daemon

// Publishing what the daemon set up on its Node.
//
// `kubectl estuary status` must say for every node, in one read even at a
// thousand nodes, whether its conflist is in place, whether its fast
// path runs and, while it enforces policy, whether kube-proxy's mode
// bypasses it (kubeproxymode.go). Each daemon publishes that on its own Node, in the annotation
// networking.estuary.io/daemon-status (api/v1 NodeDaemonStatus), as it
// publishes its BGP sessions: only that daemon writes it, so no writers
// contend, and one list of Nodes answers for the cluster. Asking each
// daemon (pods/exec, or its loopback port) would cost a round trip per
// node and rights a status reader should not need.
//
// Level-triggered and cheap. Every statusInterval the reporter makes the
// conflist hold what the daemon installs (one read of a small file;
// written again only when another installer or an operator removed or
// replaced it, since a node without it starts no pod), builds the status
// and compares it with the annotation on the Node in the informer cache;
// it patches the Node only when they differ. Nothing in it changes with
// time alone, so a quiet node costs no write: a stale data path is
// published as a problem fixed when it turns stale, not as the time of the
// last good pass (datapathhealth.go). Events are recorded on
// transitions only: against the last status this daemon built or, at its
// first pass, against the annotation a previous daemon left, so a restart
// does not repeat an Event whose cause has not changed.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/version"
)

// statusInterval is how often the reporter checks the conflist and the
// Node's annotation.
const statusInterval = 15 * time.Second

// publishTimeout bounds the status patch made when the daemon stops on a
// conflist it could not write.
const publishTimeout = 5 * time.Second

// recorder records an Event on the daemon's Node (nodeEvents).
type recorder interface {
	Record(eventType, reason, action, note string)
}

// statusReporter publishes the daemon's status on its Node.
type statusReporter struct {
	node     string
	reader   client.Reader // the informer cache, which holds every Node
	writer   client.Writer
	events   recorder
	dir      string   // the CNI conf dir
	list     Conflist // what the daemon installs there
	fastPath estuaryv1.NodeFastPathStatus
	// kubeProxyMode learns kube-proxy's mode; nil without policy.
	kubeProxyMode kubeProxyModeFunc
	// passes is the data-path loop's progress, judged against staleAfter
	// (datapathhealth.go); nil publishes no data-path part.
	passes     passProgress
	staleAfter time.Duration
	interval   time.Duration
	// uplinks is the node's link per mode (uplinks.go); nil publishes none.
	uplinks func() []estuaryv1.NodeUplinkStatus
	// last is the status of the previous pass; nil before the first.
	last *estuaryv1.NodeDaemonStatus
}

// installConflist writes the conflist, once, before the daemon serves. A
// failure is recorded as an Event and published on the Node (read and
// patched directly: the cache may not have synced) before it is returned,
// since the daemon stops on it.
func (r *statusReporter) installConflist(ctx context.Context) error {
	st := r.status(ctx)
	if st.Conflist.Installed {
		log.Info("conflist installed", "path", st.Conflist.Path, "bandwidth", r.list.Chains(BandwidthPluginType))
		return nil
	}
	r.transitions(nil, st)
	r.last = &st
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if err := r.publish(ctx, nil, st); err != nil {
		log.Error(err, "daemon status not published")
	}
	return fmt.Errorf("install conflist: %s", st.Conflist.Error)
}

// run checks and publishes every interval, from the cache's sync until ctx
// ends. Failures are logged and retried at the next pass.
func (r *statusReporter) run(ctx context.Context, synced <-chan struct{}) error {
	select {
	case <-synced:
	case <-ctx.Done():
		return nil
	}
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		if err := r.pass(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "daemon status not published; retrying", "in", r.interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// pass builds the status, records the Events its changes call for and
// patches the Node when its annotation differs.
func (r *statusReporter) pass(ctx context.Context) error {
	st := r.status(ctx)
	var node corev1.Node
	if err := r.reader.Get(ctx, client.ObjectKey{Name: r.node}, &node); err != nil {
		st.DataPath = r.dataPathStatus(r.last)
		r.transitions(r.last, st)
		r.last = &st
		return fmt.Errorf("node %s: %w", r.node, err)
	}
	prev := r.last
	if prev == nil {
		prev = decodeDaemonStatus(node.Annotations[estuaryv1.AnnotationDaemonStatus])
	}
	st.DataPath = r.dataPathStatus(prev)
	r.transitions(prev, st)
	r.last = &st
	return r.publish(ctx, &node, st)
}

// status checks (and repairs) the conflist, asks kube-proxy's mode while
// policy is on, and returns the daemon's status.
func (r *statusReporter) status(ctx context.Context) estuaryv1.NodeDaemonStatus {
	st := estuaryv1.NodeDaemonStatus{Version: version.Version, Conflist: ensureConflist(r.dir, r.list), FastPath: r.fastPath,
		Policy: r.policyStatus(ctx)}
	if r.uplinks != nil {
		st.Uplinks = r.uplinks()
	}
	return st
}

// publish patches st into node's annotation unless node (nil: unknown)
// already carries it.
func (r *statusReporter) publish(ctx context.Context, node *corev1.Node, st estuaryv1.NodeDaemonStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("node %s: encode daemon status: %w", r.node, err)
	}
	if node != nil && node.Annotations[estuaryv1.AnnotationDaemonStatus] == string(b) {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, estuaryv1.AnnotationDaemonStatus, b)
	// A fresh object: the patch's answer must not land in the cache's Node.
	target := &corev1.Node{}
	target.Name = r.node
	if err := r.writer.Patch(ctx, target, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("node %s: publish daemon status in annotation %s: %w", r.node, estuaryv1.AnnotationDaemonStatus, err)
	}
	log.V(1).Info("published daemon status", "node", r.node, "status", string(b))
	return nil
}

// transitions records the Events for what changed from prev (nil: nothing
// known) to st.
func (r *statusReporter) transitions(prev *estuaryv1.NodeDaemonStatus, st estuaryv1.NodeDaemonStatus) {
	c, was := st.Conflist, estuaryv1.NodeConflistStatus{Installed: true}
	if prev != nil {
		was = prev.Conflist
	}
	switch {
	case !c.Installed && was.Installed:
		r.events.Record(corev1.EventTypeWarning, ReasonConflistNotWritten, "InstallConflist",
			fmt.Sprintf("conflist %s could not be written; the node starts no pod until it is: %s", c.Path, c.Error))
	case c.Installed && !was.Installed:
		r.events.Record(corev1.EventTypeNormal, ReasonConflistInstalled, "InstallConflist",
			fmt.Sprintf("conflist %s written", c.Path))
	}
	if c.ShadowedBy != "" && c.ShadowedBy != was.ShadowedBy {
		r.events.Record(corev1.EventTypeWarning, ReasonConflistShadowed, "InstallConflist",
			fmt.Sprintf("the container runtime reads %s, not estuary's %s: it sorts first in %s",
				c.ShadowedBy, filepath.Base(c.Path), filepath.Dir(c.Path)))
	}
	f := st.FastPath
	if f.State == estuaryv1.FastPathRefused && (prev == nil || prev.FastPath != f) {
		r.events.Record(corev1.EventTypeWarning, ReasonFastPathRefused, "LoadFastPath",
			"the kernel refused the fast path; pods' traffic takes the kernel's forwarding path: "+f.Reason)
	}
	r.policyTransitions(prev, r.last, st)
	r.dataPathTransitions(prev, st)
	uplinkTransitions(r.events, prev, st)
}

// decodeDaemonStatus parses an annotation value; nil when absent or not
// understood.
func decodeDaemonStatus(v string) *estuaryv1.NodeDaemonStatus {
	if v == "" {
		return nil
	}
	var st estuaryv1.NodeDaemonStatus
	if json.Unmarshal([]byte(v), &st) != nil {
		return nil
	}
	return &st
}

// ensureConflist makes dir/ConflistName hold list, writing it when it does
// not, and says whether it does and which configuration file, if another,
// the container runtime reads first.
func ensureConflist(dir string, list Conflist) estuaryv1.NodeConflistStatus {
	st := estuaryv1.NodeConflistStatus{Path: filepath.Join(dir, ConflistName)}
	wrote, err := InstallConflist(dir, list)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	if wrote {
		log.Info("conflist written", "path", st.Path)
	}
	st.Installed = true
	if first := firstNetworkConfig(dir); first != ConflistName {
		st.ShadowedBy = first
	}
	return st
}

// cniConfigExts are the extensions of the files a CNI runtime (libcni's
// ConfFiles, as containerd and CRI-O call it) reads a network from; it
// takes the first in name order.
var cniConfigExts = []string{".conf", ".conflist", ".json"}

// firstNetworkConfig is the name of the first network configuration file
// in dir, or "" when it cannot be read.
func firstNetworkConfig(dir string) string {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(cniConfigExts, filepath.Ext(e.Name())) {
			return e.Name()
		}
	}
	return ""
}
