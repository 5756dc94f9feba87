package cli

import (
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestStatusNamesAStaleDataPath: a node whose daemon published a stale data
// path fails status (exit 3) with the node named and the daemon's reason.
func TestStatusNamesAStaleDataPath(t *testing.T) {
	f := newStatusFixture(t)
	f.annotate(t, f.nodeB, estuaryv1.AnnotationDaemonStatus,
		`{"version":"v0.0.0-test","conflist":{"path":"/etc/cni/net.d/10-estuary.conflist","installed":true},"fastPath":{"state":"Loaded"},`+
			`"dataPath":{"problem":"no data-path pass has fully succeeded for 1m31s, over the stale bound of 1m30s; the last pass that ended failed: overlay: apply: no such device",`+
			`"lastGoodPass":"2026-12-07T18:00:00Z"}}`)
	f.wantProblem(t, f.nodeB, "data path stale: no data-path pass has fully succeeded for 1m31s", "overlay: apply: no such device")
}
