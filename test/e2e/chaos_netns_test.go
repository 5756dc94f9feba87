//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// configuredReport compares, for every live pod of a namespace, the
// addresses configured on its eth0 in its network namespace with its Bound
// IPInstance records.
type configuredReport struct {
	pods int
	// differ counts pods whose configured addresses are not exactly their
	// recorded ones; shared counts addresses configured in two pods or
	// more; missingFamilies counts families a pod is given (by its records
	// and their address count) but has no address of configured.
	differ, shared, missingFamilies int
	problems                        []string
}

// podAddrs is one pod's configured and recorded addresses.
type podAddrs struct {
	pod        string
	configured []string
	recorded   []string
	// want is the number of families the pod is given: the address count
	// its records carry, at least one per recorded family and at least 1.
	want int
}

// checkConfigured reads every live pod of ns in its network namespace and
// compares what is configured with the records.
func (e *labEnv) checkConfigured(t *testing.T, ns string) configuredReport {
	t.Helper()
	var got []podAddrs
	eventually(t, "the addresses configured in every pod of "+ns, 3*time.Minute, func(ctx context.Context) error {
		var err error
		got, err = e.readConfigured(ctx, ns)
		return err
	})
	return compareConfigured(got)
}

// readConfigured reads, for each running pod of ns not being deleted, the
// global addresses of eth0 in its network namespace and the addresses its
// Bound records give it.
func (e *labEnv) readConfigured(ctx context.Context, ns string) ([]podAddrs, error) {
	var l corev1.PodList
	if err := e.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list pods of %s: %w", ns, err)
	}
	records, err := e.instances(ctx, ns, nil)
	if err != nil {
		return nil, err
	}
	var out []podAddrs
	for i := range l.Items {
		p := &l.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Spec.HostNetwork {
			continue
		}
		sb, err := e.sandboxOf(ctx, p)
		if err != nil {
			return nil, err
		}
		configured, err := netnsAddrs(ctx, sb.netnsPath(), "eth0")
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		pa := podAddrs{pod: p.Name, configured: configured, want: 1}
		families := map[bool]bool{}
		for j := range records {
			r := &records[j]
			b := r.Spec.Binding
			if r.Status.Phase != estuaryv1.IPInstanceBound || b.PodName != p.Name || (b.PodUID != "" && b.PodUID != string(p.UID)) {
				continue
			}
			a := instanceAddr(r)
			pa.recorded = append(pa.recorded, a)
			families[isIPv6(a)] = true
			if n, err := strconv.Atoi(r.Annotations[estuaryv1.AnnotationAddresses]); err == nil && n > pa.want {
				pa.want = n
			}
		}
		pa.want = max(pa.want, len(families))
		slices.Sort(pa.recorded)
		out = append(out, pa)
	}
	return out, nil
}

// netnsAddrs lists the global addresses of dev in the network namespace at
// path (`ip -o addr show dev DEV scope global`, in JSON).
func netnsAddrs(ctx context.Context, path, dev string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+path, "ip", "-j", "addr", "show", "dev", dev, "scope", "global").Output() // #nosec G204 -- test
	if err != nil {
		return nil, fmt.Errorf("ip addr show dev %s in %s: %w", dev, path, err)
	}
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("ip -j addr show dev %s in %s: %w", dev, path, err)
	}
	var addrs []string
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if a.Local != "" {
				addrs = append(addrs, a.Local)
			}
		}
	}
	slices.Sort(addrs)
	return addrs, nil
}

func compareConfigured(pods []podAddrs) configuredReport {
	r := configuredReport{pods: len(pods)}
	byAddr := map[string][]string{}
	for _, p := range pods {
		for _, a := range p.configured {
			byAddr[a] = append(byAddr[a], p.pod)
		}
		if !slices.Equal(p.configured, p.recorded) {
			r.differ++
			r.problems = append(r.problems, fmt.Sprintf("pod %s: configured %v, recorded %v", p.pod, p.configured, p.recorded))
		}
		have := map[bool]bool{}
		for _, a := range p.configured {
			if slices.Contains(p.recorded, a) {
				have[isIPv6(a)] = true
			}
		}
		if missing := p.want - len(have); missing > 0 {
			r.missingFamilies += missing
			r.problems = append(r.problems, fmt.Sprintf("pod %s: given %d families, %d of them configured as recorded (configured %v, recorded %v)", p.pod, p.want, len(have), p.configured, p.recorded))
		}
	}
	for _, a := range slices.Sorted(maps.Keys(byAddr)) {
		if holders := byAddr[a]; len(holders) > 1 {
			r.shared++
			r.problems = append(r.problems, fmt.Sprintf("%s configured in pods %s", a, strings.Join(holders, ", ")))
		}
	}
	return r
}

func isIPv6(a string) bool {
	ip, err := netip.ParseAddr(a)
	return err == nil && ip.Is6() && !ip.Is4In6()
}
