// Package bootstrap creates the objects a release ships but cannot create
// itself: estuary's default Network and Subnets must pass the admission
// webhook, which fails closed and is served by the manager the same release
// installs, so the chart renders them into a ConfigMap and the manager's
// leader creates them once its webhook serves.
//
// Each object is created if it is absent and never updated, patched or
// deleted: an object that exists (created earlier, or by an administrator)
// is left exactly as it is. Creation is retried with exponential backoff
// until it succeeds or the manager stops, since the webhook answers only
// once its Service has a ready endpoint and its CA is injected. Every
// object created is logged and recorded as an event, every failure logged
// and recorded as a Warning event when its message changes.
//
// Every created object can carry an owner reference to a cluster-scoped
// object of the release (in the chart, the ClusterRole estuary-bootstrap,
// which grants nothing), so that uninstalling the release lets the garbage
// collector delete it.
package bootstrap
