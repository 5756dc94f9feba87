// Package ipwait tells the node daemon which addresses the manager gave a pod.
// It watches the IPInstances bound to this node through an informer and wakes
// every CNI ADD waiting for a pod when one of that pod's records changes, so an
// ADD neither polls the API server nor acts on a record meant for an earlier
// pod of the same name (the pod UID must match and the record must be Bound).
// Given the node's BGP sessions, the wait also covers them: a pod
// of a BGP network that waits for a peer (spec.bgpWaitForPeer, true unless
// set false) gets its addresses only once the node's speaker for that
// network has an Established session, and one with each peer marked
// requireEstablished (Ready), within the same deadline; a GlobalBGP pod
// waits so for its node's BGP network.
package ipwait

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Waiter resolves pods' addresses over an IPInstance informer.
type Waiter struct {
	reader   client.Reader
	node     string
	diagnose Diagnose
	sessions BGPSessions

	mu      sync.Mutex
	waiting map[string][]chan struct{} // by namespace/pod
}

// New registers with c's IPInstance informer and serves the records bound to
// node (label networking.estuary.io/node=<node>); c may hold other nodes'
// records too (the daemon's data path needs them) and must be started by the
// caller. Wait reads it, so a Wait before the cache syncs just waits.
// sessions, when not nil, gates Wait on the node's BGP sessions (bgpgate.go).
func New(ctx context.Context, c cache.Cache, node string, sessions BGPSessions) (*Waiter, error) {
	inf, err := c.GetInformer(ctx, &estuaryv1.IPInstance{})
	if err != nil {
		return nil, fmt.Errorf("ipinstance informer: %w", err)
	}
	w := &Waiter{reader: c, node: node, sessions: sessions, waiting: map[string][]chan struct{}{}}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.changed,
		UpdateFunc: func(_, obj any) { w.changed(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch ipinstances: %w", err)
	}
	return w, nil
}

// changed wakes the ADDs waiting for the record's pod.
func (w *Waiter) changed(obj any) {
	ipi, ok := obj.(*estuaryv1.IPInstance)
	if !ok {
		return
	}
	key := ipi.Spec.Binding.Namespace + "/" + ipi.Spec.Binding.PodName
	w.mu.Lock()
	chans := w.waiting[key]
	delete(w.waiting, key)
	w.mu.Unlock()
	for _, ch := range chans {
		close(ch)
	}
}

// Wait returns the pod's addresses once every record for it is Bound to this
// pod UID and, given the node's BGP sessions, the node has an Established
// session in each of their BGP networks that waits for one; it fails when
// ctx ends, naming the pod.
func (w *Waiter) Wait(ctx context.Context, namespace, pod, uid string) ([]Address, error) {
	key := namespace + "/" + pod
	for {
		// Subscribe before reading, so a record that lands between the read
		// and the wait still wakes us.
		ch := w.subscribe(key)
		addrs, networks, err := w.lookup(ctx, namespace, pod, uid)
		if err != nil || len(addrs) > 0 {
			w.unsubscribe(key, ch)
			if err == nil {
				err = w.waitPeers(ctx, key, networks)
			}
			if err != nil {
				return nil, err
			}
			return addrs, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			w.unsubscribe(key, ch)
			return nil, fmt.Errorf("pod %s (uid %s): no address recorded for it yet%s: %w", key, uid,
				w.explain(namespace, pod, uid), ctx.Err())
		}
	}
}

// Diagnose says, after a wait timed out, what the manager last reported
// about the pod, so the runtime's error points at the cause.
type Diagnose func(ctx context.Context, namespace, pod, uid string) string

// SetDiagnose installs d; call it before the first Wait.
func (w *Waiter) SetDiagnose(d Diagnose) { w.diagnose = d }

// diagnoseTimeout bounds the lookup made after a wait timed out.
const diagnoseTimeout = 2 * time.Second

func (w *Waiter) explain(namespace, pod, uid string) string {
	if w.diagnose == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), diagnoseTimeout)
	defer cancel()
	return " (" + w.diagnose(ctx, namespace, pod, uid) + ")"
}

func (w *Waiter) subscribe(key string) chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiting[key] = append(w.waiting[key], ch)
	w.mu.Unlock()
	return ch
}

func (w *Waiter) unsubscribe(key string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.waiting[key]
	for i, c := range list {
		if c == ch {
			w.waiting[key] = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(w.waiting[key]) == 0 {
		delete(w.waiting, key)
	}
}

// lookup reads the pod's records from the informer cache: the addresses
// (with the MAC they pin for the pod's interface, if any) and the networks
// they belong to (those the cache has). It returns nothing (and no error)
// while the manager is still working on this pod: a record is retained,
// bound to another pod UID, or carries no address count, or the pod has
// fewer families than the count its records carry (the largest, since every
// Bound record carries the pod's count, see podipam's applyHolding). Of two
// records of one family (a split brain the manager settles by the address
// the pod reports, see podipam's onePerFamily) it takes the lower address.
// A record that does not parse, or records that pin different MACs, are an
// error.
func (w *Waiter) lookup(ctx context.Context, namespace, pod, uid string) ([]Address, []estuaryv1.Network, error) {
	var list estuaryv1.IPInstanceList
	err := w.reader.List(ctx, &list, client.MatchingLabels{estuaryv1.LabelNamespace: namespace, estuaryv1.LabelPod: pod, estuaryv1.LabelNode: w.node})
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: list its ipinstances: %w", namespace, pod, err)
	}
	want := 0
	for i := range list.Items {
		ipi := &list.Items[i]
		n, err := strconv.Atoi(ipi.Annotations[estuaryv1.AnnotationAddresses])
		if ipi.Spec.Binding.PodUID != uid || ipi.Status.Phase != estuaryv1.IPInstanceBound || err != nil || n < 1 {
			return nil, nil, nil
		}
		want = max(want, n)
	}
	records, err := onePerFamily(list.Items)
	if err != nil || len(records) == 0 || len(records) < want {
		return nil, nil, err
	}
	out := make([]Address, len(records))
	var names []string
	for i := range records {
		if out[i], err = address(&records[i]); err != nil {
			return nil, nil, err
		}
		if !slices.Contains(names, records[i].Spec.Network) {
			names = append(names, records[i].Spec.Network)
		}
	}
	if err := sameMAC(records); err != nil {
		return nil, nil, err
	}
	networks, err := w.networks(ctx, namespace+"/"+pod, names)
	if err != nil {
		return nil, nil, err
	}
	if err := w.resolve(ctx, namespace+"/"+pod, records, networks, out); err != nil {
		return nil, nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Family < out[j].Family })
	return out, networks, nil
}

// onePerFamily keeps, of each family, the record of the lowest address.
func onePerFamily(items []estuaryv1.IPInstance) ([]estuaryv1.IPInstance, error) {
	var out []estuaryv1.IPInstance
	var addrs []netip.Addr
	for i := range items {
		p, err := netip.ParsePrefix(items[i].Spec.Address.IP)
		if err != nil {
			return nil, fmt.Errorf("ipinstance %s: spec.address.ip: %w", items[i].Name, err)
		}
		a := p.Addr()
		j := slices.IndexFunc(addrs, func(b netip.Addr) bool { return b.Is4() == a.Is4() })
		switch {
		case j < 0:
			out, addrs = append(out, items[i]), append(addrs, a)
		case a.Less(addrs[j]):
			out[j], addrs[j] = items[i], a
		}
	}
	return out, nil
}

// resolve completes each address (out[i] is the address of records[i])
// with what the node's data path needs of its network, so the ADD reads
// nothing more: its network and subnet, whether it is an Underlay address
// (the uplink's MTU; a network missing from the cache leaves its addresses
// as overlay ones, whose smaller MTU fits either network), and, for a
// VLAN-mode network whose domain holds this node, the segment's VLAN id
// (the subnet's own netID, else the network's). The node is read only for
// a pod with a VLAN address, and must be in the cache then.
func (w *Waiter) resolve(ctx context.Context, key string, records []estuaryv1.IPInstance, networks []estuaryv1.Network,
	out []Address) error {
	byName := map[string]*estuaryv1.Network{}
	for i := range networks {
		byName[networks[i].Name] = &networks[i]
	}
	var node *corev1.Node
	for i := range records {
		spec := &records[i].Spec
		out[i].Network, out[i].Subnet = spec.Network, spec.Subnet
		n := byName[spec.Network]
		if n == nil || n.Spec.Type != estuaryv1.NetworkTypeUnderlay && n.Spec.Type != estuaryv1.NetworkTypeGlobalBGP {
			continue
		}
		out[i].Underlay = true
		if netmodel.Mode(&n.Spec) != estuaryv1.NetworkModeVLAN {
			continue
		}
		if node == nil {
			node = &corev1.Node{}
			if err := w.reader.Get(ctx, client.ObjectKey{Name: w.node}, node); err != nil {
				return fmt.Errorf("pod %s: underlay checks: node %s: %w", key, w.node, err)
			}
		}
		if !netmodel.Attached(n, node.Labels) {
			continue
		}
		seg, err := w.segment(ctx, key, n, spec.Subnet)
		if err != nil {
			return err
		}
		out[i].Segment = seg
	}
	return nil
}

// segment is the VLAN segment of subnet in network n; nil when the cache
// does not have the subnet (it is being deleted).
func (w *Waiter) segment(ctx context.Context, key string, n *estuaryv1.Network, subnet string) (*Segment, error) {
	var sn estuaryv1.Subnet
	if err := w.reader.Get(ctx, client.ObjectKey{Name: subnet}, &sn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("pod %s: subnet %s: %w", key, subnet, err)
	}
	vlan := netmodel.VLAN(&n.Spec)
	if v := netmodel.SubnetVLAN(&sn.Spec); v != nil {
		vlan = *v
	}
	return &Segment{VLAN: vlan}, nil
}

// networks reads the named networks from the cache, once per ADD, leaving
// out those it does not have.
func (w *Waiter) networks(ctx context.Context, key string, names []string) ([]estuaryv1.Network, error) {
	var out []estuaryv1.Network
	for _, name := range names {
		var n estuaryv1.Network
		if err := w.reader.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("pod %s: network %s: %w", key, name, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func address(ipi *estuaryv1.IPInstance) (Address, error) {
	p, err := netip.ParsePrefix(ipi.Spec.Address.IP)
	if err != nil {
		return Address{}, fmt.Errorf("ipinstance %s: spec.address.ip: %w", ipi.Name, err)
	}
	a := Address{IP: p, Family: family.IPv4}
	if p.Addr().Is6() {
		a.Family = family.IPv6
	}
	if ipi.Spec.Address.Gateway != "" {
		gw, err := netip.ParseAddr(string(ipi.Spec.Address.Gateway))
		if err != nil {
			return Address{}, fmt.Errorf("ipinstance %s: spec.address.gateway: %w", ipi.Name, err)
		}
		a.Gateway = gw
	}
	mac, err := recordMAC(ipi)
	if err != nil {
		return Address{}, err
	}
	a.MAC = mac
	return a, nil
}
