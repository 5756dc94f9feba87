//go:build lab

// Package e2e holds estuary's end-to-end tests: they bring up (or reuse) a
// three-node lab cluster with `estuary-lab up --cni estuary` and prove the
// overlay data path, address management and the CNI plugin on real nodes:
// pod-to-pod and node-to-pod traffic without NAT, masquerading to the outside,
// Services, StatefulSet address retention, churn without duplicate
// addresses, daemon and manager restarts and crashes, the CNI verbs run
// against the installed binary, an upgrade from an earlier commit without a
// lost probe and an uninstall that leaves every node as before, and a real
// Prometheus (Debian's, unpacked by hack/lab-deps.sh) scraping every
// component's authenticated /metrics through a pod storm.
//
// They need root, and bringing a lab up replaces any lab already running on
// the machine. The lab comes up at the first test that needs one, so a run
// of only the package's pure tests brings up none. Run: go test -tags lab -timeout 60m -v ./test/e2e/
// ESTUARY_E2E_REUSE=<state-dir> runs them against a lab that is already up
// (no up, no down); ESTUARY_E2E_KEEP=1 leaves the lab they brought up running;
// ESTUARY_E2E_KUBERNETES_VERSION=vX.Y.Z brings the lab up on that Kubernetes
// version (make test-kube-version); ESTUARY_UPGRADE_FROM=<commit> names the
// commit TestUpgradeWithoutAnOutage upgrades from; ESTUARY_CNP_TESTS (all,
// or ShortNames separated by commas) chooses the network-policy-api
// conformance tests TestClusterNetworkPolicyConformance runs (make
// conformance-cnp), and ESTUARY_CNP_REPORT where it writes their report.
package e2e
