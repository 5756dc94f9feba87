// Package manager runs estuary-manager: the cluster-wide controllers (pod
// address allocation and release, StatefulSet address retention, Subnet and
// Network status, Node labels, BGP status), the admission webhook on every
// replica, and the bootstrap of the release's default network on the
// leader, and its metrics (over HTTPS, to scrapers the API server
// authenticates and authorizes, with Config.MetricsSecure). Run takes a Config, as the node daemon's Run does, so that
// cmd/estuary-manager only turns flags into a Config.
package manager
