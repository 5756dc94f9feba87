package cnibackend

// Local pods. The data-path loop keeps table 1000 in line with the
// endpoint store through LocalPods: podnet reads the kernel first and then
// asks for the list, which LocalPods takes from the store, with the host
// veths of the attachments the CNI server has a request in progress for
// (the server's Busy), so that a route an ADD still in flight wrote is
// never taken away (podnet/localpods.go says why the order matters).

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// EndpointLister lists the attachments recorded on the node.
type EndpointLister interface {
	List() ([]endpointstore.Endpoint, error)
}

// LocalPods reconciles table 1000 from the endpoint store; it is the
// loop's datapath.LocalPods.
type LocalPods struct {
	table *podnet.LocalPods
	eps   EndpointLister
	busy  func() []endpointstore.Key
}

// NewLocalPods returns the local-pods part over table, the endpoints eps
// and busy, the attachments with a request in progress
// (cniserver.Server.Busy); nil means none.
func NewLocalPods(table *podnet.LocalPods, eps EndpointLister, busy func() []endpointstore.Key) *LocalPods {
	if busy == nil {
		busy = func() []endpointstore.Key { return nil }
	}
	return &LocalPods{table: table, eps: eps, busy: busy}
}

// Reconcile brings table 1000 and the shared rule to what the endpoint
// store says. It returns the plan it applied and the endpoints skipped
// because their host veth does not exist. An endpoint whose recorded
// address does not parse is reported (unless its veth is missing or busy)
// and gets no route.
func (l *LocalPods) Reconcile(ctx context.Context) (desired.Plan, []endpointstore.Key, error) {
	var in localPodsInput
	plan, missingVeths, err := l.table.Reconcile(ctx, func() ([]podnet.LocalPod, []string, error) {
		eps, err := l.eps.List()
		if err != nil {
			return nil, nil, fmt.Errorf("list endpoints: %w", err)
		}
		in = localPodsOf(eps, l.busy())
		return in.pods, in.busy, nil
	})
	missing, perr := in.result(missingVeths)
	if perr != nil {
		return plan, missing, perr
	}
	return plan, missing, err
}

// result maps the host veths podnet found missing back to their endpoints
// and reports the endpoints whose recorded address does not parse, unless
// their veth is missing or busy.
func (in localPodsInput) result(missingVeths []string) ([]endpointstore.Key, error) {
	var missing []endpointstore.Key
	skip := make(map[string]bool, len(missingVeths)+len(in.busy))
	for _, dev := range missingVeths {
		missing = append(missing, in.keys[dev])
		skip[dev] = true
	}
	for _, dev := range in.busy {
		skip[dev] = true
	}
	var errs []error
	for _, b := range in.bad {
		if !skip[b.dev] {
			errs = append(errs, b.err)
		}
	}
	if len(errs) > 0 {
		return missing, fmt.Errorf("local pods: %w", errors.Join(errs...))
	}
	return missing, nil
}

// localPodsInput is the endpoint store as podnet's table sees it.
type localPodsInput struct {
	pods []podnet.LocalPod
	busy []string                     // host veths of busy attachments
	keys map[string]endpointstore.Key // endpoint of each host veth
	bad  []badEndpoint
}

// badEndpoint is an endpoint whose recorded address does not parse.
type badEndpoint struct {
	dev string
	err error
}

// localPodsOf lists eps for table 1000. An endpoint whose recorded address
// does not parse is listed without addresses, so that its veth gets no
// route, and kept in bad.
func localPodsOf(eps []endpointstore.Endpoint, busy []endpointstore.Key) localPodsInput {
	in := localPodsInput{keys: make(map[string]endpointstore.Key, len(eps))}
	for _, k := range busy {
		in.busy = append(in.busy, hostVethOf(k))
	}
	for _, ep := range eps {
		dev := hostVethOf(ep.Key)
		in.keys[dev] = ep.Key
		ips, err := endpointIPs(ep)
		if err != nil {
			in.bad = append(in.bad, badEndpoint{dev: dev, err: err})
		}
		in.pods = append(in.pods, podnet.LocalPod{HostVeth: dev, IPs: ips})
	}
	return in
}

// endpointIPs are ep's recorded addresses.
func endpointIPs(ep endpointstore.Endpoint) ([]netip.Addr, error) {
	ips := make([]netip.Addr, 0, len(ep.IPs))
	for _, s := range ep.IPs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: recorded address %q: %w", ep.Key, s, err)
		}
		ips = append(ips, p.Addr())
	}
	return ips, nil
}

// hostVethOf is the host veth of a recorded key.
func hostVethOf(k endpointstore.Key) string {
	return podnet.HostVethName(k.ContainerID, k.IfName)
}
