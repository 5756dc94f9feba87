package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/estuary-cni/estuary/internal/dataplane"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Agent applies the overlay data path to one node's network namespace and
// answers its neighbour misses. Apply calls run one at a time; Answer runs
// beside them.
type Agent struct {
	hostNetns string
	h         *ops.Handle
	nat       *ops.NAT
	rec       *dataplane.Reconciler

	mu       sync.Mutex
	sysctls  []sysctl.Setting
	natDirty []family.Family

	// OnError, when set before Answer starts, receives the answerer's
	// failures (a failed subscription, a failed write); they are retried.
	OnError func(error)
}

// NewAgent returns an agent for the node's network namespace at hostNetns
// (for example /proc/self/ns/net; empty means the process's own).
func NewAgent(hostNetns string) (*Agent, error) {
	h, err := ops.Open(hostNetns)
	if err != nil {
		return nil, fmt.Errorf("overlay agent: %w", err)
	}
	nat, err := ops.OpenNAT(hostNetns)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("overlay agent: %w", err)
	}
	return &Agent{hostNetns: hostNetns, h: h, nat: nat, rec: dataplane.NewReconciler(h, Ownership())}, nil
}

// Close releases the agent's handles. Answer calls must have returned.
func (a *Agent) Close() {
	a.h.Close()
	a.nat.Close()
}

// Apply brings the node's overlay data path to in: it ensures the VXLAN
// device and its sysctls (the device is brought up only once they are
// written), reconciles routes, rules, proxy neighbours and FDB entries under
// Ownership, and ensures the NAT tables. It returns the reconcile's plan,
// which is empty when nothing but NAT changed. It is idempotent.
func (a *Agent) Apply(ctx context.Context, in Input) (desired.Plan, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := validate(in.Config); err != nil {
		return desired.Plan{}, err
	}
	if err := a.ensureDevice(in); err != nil {
		return desired.Plan{}, err
	}
	want, nat := Desired(in)
	plan, err := a.rec.Reconcile(ctx, want)
	if err != nil {
		return plan, fmt.Errorf("overlay %s: %w", in.Device, err)
	}
	changed, err := a.nat.Ensure(nat)
	a.natDirty = changed
	if err != nil {
		return plan, fmt.Errorf("overlay %s: nat: %w", in.Device, err)
	}
	return plan, nil
}

// Applied reports what the last Apply did beyond its plan: the sysctls it
// wants on the device (each written only if it differed) and the NAT
// families whose table it rewrote.
func (a *Agent) Applied() (sysctls []sysctl.Setting, natChanged []family.Family) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]sysctl.Setting(nil), a.sysctls...), append([]family.Family(nil), a.natDirty...)
}

func validate(c Config) error {
	switch {
	case c.Device == "" || len(c.Device) > 15:
		return fmt.Errorf("overlay: device name %q: want 1 to 15 bytes", c.Device)
	case !c.LocalIP.IsValid():
		return fmt.Errorf("overlay %s: no local VTEP address", c.Device)
	case c.VNI == 0 || c.VNI >= 1<<24:
		return fmt.Errorf("overlay %s: VNI %d out of range 1-16777215", c.Device, c.VNI)
	case c.MTU < 0 || c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("overlay %s: MTU %d or port %d out of range", c.Device, c.MTU, c.Port)
	}
	return nil
}

func (a *Agent) ensureDevice(in Input) error {
	port := in.Port
	if port == 0 {
		port = DefaultPort
	}
	_, err := a.h.Devices().EnsureVXLAN(ops.VXLAN{
		Name: in.Device, VNI: in.VNI, Port: port, Parent: in.Parent,
		LocalIP: in.LocalIP.Unmap(), MTU: in.MTU, MAC: in.MAC,
	})
	if err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	v4, v6 := families(in)
	a.sysctls = Sysctls(in.Device, v4, v6 && ipv6Enabled())
	if err := sysctl.Write(a.hostNetns, a.sysctls); err != nil {
		return fmt.Errorf("overlay %s: %w", in.Device, err)
	}
	if err := a.h.Links().SetUp(in.Device); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	return nil
}

// Sysctls returns the per-device settings of the VXLAN device dev, for the
// families it carries. IPv4: proxy replies without delay, the first probe
// to user space (the answerer), no reverse-path filter, forwarding (needed
// to proxy). IPv6: the same, with proxy NDP instead of proxy ARP.
func Sysctls(dev string, v4, v6 bool) []sysctl.Setting {
	var s []sysctl.Setting
	if v4 {
		s = append(s,
			sysctl.Setting{Key: "net/ipv4/neigh/" + dev + "/proxy_delay", Value: "0"},
			sysctl.Setting{Key: "net/ipv4/neigh/" + dev + "/app_solicit", Value: "1"},
			sysctl.Setting{Key: "net/ipv4/conf/" + dev + "/rp_filter", Value: "0"},
			sysctl.Setting{Key: "net/ipv4/conf/" + dev + "/forwarding", Value: "1"},
		)
	}
	if v6 {
		s = append(s,
			sysctl.Setting{Key: "net/ipv6/neigh/" + dev + "/proxy_delay", Value: "0"},
			sysctl.Setting{Key: "net/ipv6/neigh/" + dev + "/app_solicit", Value: "1"},
			sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/proxy_ndp", Value: "1"},
			sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/forwarding", Value: "1"},
		)
	}
	return s
}

// families reports which address families the overlay carries.
func families(in Input) (v4, v6 bool) {
	fams := subnetFamilies(in.Subnets)
	for _, p := range in.LocalPods {
		if p.IsValid() {
			fams[family.Of(p.Unmap())] = true
		}
	}
	return fams[family.IPv4], fams[family.IPv6]
}

func ipv6Enabled() bool {
	_, err := os.Stat("/proc/sys/net/ipv6")
	return !errors.Is(err, os.ErrNotExist)
}

// Remove takes the overlay off the node: its rules, routes, proxy
// neighbours and FDB entries, estuary's NAT tables, then the device. It
// returns the reconcile's plan. Removing what is gone succeeds.
func (a *Agent) Remove(ctx context.Context, device string) (desired.Plan, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	plan, err := a.rec.Reconcile(ctx, desired.State{})
	if err != nil {
		return plan, fmt.Errorf("remove overlay %s: %w", device, err)
	}
	if _, err := a.nat.Ensure(desired.NAT{}); err != nil {
		return plan, fmt.Errorf("remove overlay %s: nat: %w", device, err)
	}
	if err := a.h.Links().Delete(device); err != nil {
		return plan, fmt.Errorf("remove overlay: %w", err)
	}
	return plan, nil
}
