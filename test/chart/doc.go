// Package chart proves charts/estuary: it renders the chart with the checkout's
// helm (bin/helm, installed by `make helm`) for the default values, the lab's values
// and a dual-stack network, checks the names, labels, scheduling and RBAC other
// components rely on, and submits every rendered object to a real kube-apiserver
// (envtest, with the chart's CRDs) so the default Network and Subnets are checked
// against the CRD schema and CEL rules and the RBAC against the calls the manager
// and the daemon make. The default Network and Subnets are read from the
// bootstrap ConfigMap as the manager reads them; the webhook configurations are
// compared with internal/webhook's; the certificate rotator runs as the manager's
// service account with nothing but the chart's RBAC. The daemons enforce
// policy unless networkPolicy.enabled is false.
package chart
