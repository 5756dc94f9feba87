package ipam

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

func v4cfg() SubnetConfig {
	return SubnetConfig{Name: "pods-v4", Network: "pods", Prefix: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.1")}
}

func TestAddSubnetValidation(t *testing.T) {
	r := func(s string) []Range { return []Range{rng(t, s)} }
	tests := []struct {
		name   string
		mutate func(c *SubnetConfig)
		substr string // empty: valid
	}{
		{"valid v4", func(*SubnetConfig) {}, ""},
		{"valid v6 /64", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("fd00::/64"), ip("fd00::1") }, ""},
		{"valid v6 /120", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("fd00::/120"), netip.Addr{} }, ""},
		{"valid v6 /127", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("fd00::/127"), netip.Addr{} }, ""},
		{"valid v4 /30", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("10.0.0.0/30"), netip.Addr{} }, ""},
		{"valid v4 /8 with family", func(c *SubnetConfig) { c.Prefix, c.Family = pfx("10.0.0.0/8"), family.IPv4 }, ""},
		{"empty name", func(c *SubnetConfig) { c.Name = "" }, "subnet name is empty"},
		{"empty network", func(c *SubnetConfig) { c.Network = "" }, "network name is empty"},
		{"missing prefix", func(c *SubnetConfig) { c.Prefix = netip.Prefix{} }, "prefix is missing"},
		{"non-canonical prefix", func(c *SubnetConfig) { c.Prefix = pfx("10.0.0.7/24") }, "not canonical"},
		{"v6 shorter than /64", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("fd00::/48"), netip.Addr{} }, "shorter than /64"},
		{"family mismatch", func(c *SubnetConfig) { c.Family = family.IPv6 }, "does not match"},
		{"v4 /32 has no address", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("10.0.0.0/32"), netip.Addr{} }, "no allocatable"},
		{"v4 /31 has no address", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("10.0.0.0/31"), netip.Addr{} }, "no allocatable"},
		{"v6 /128 has no address", func(c *SubnetConfig) { c.Prefix, c.Gateway = pfx("fd00::/128"), netip.Addr{} }, "no allocatable"},
		{"gateway outside", func(c *SubnetConfig) { c.Gateway = ip("10.0.1.1") }, "gateway 10.0.1.1 is outside"},
		{"gateway other family", func(c *SubnetConfig) { c.Gateway = ip("fd00::1") }, "gateway fd00::1 is outside"},
		{"gateway is network", func(c *SubnetConfig) { c.Gateway = ip("10.0.0.0") }, "network or broadcast"},
		{"gateway is broadcast", func(c *SubnetConfig) { c.Gateway = ip("10.0.0.255") }, "network or broadcast"},
		{"start outside", func(c *SubnetConfig) { c.Start = ip("10.0.1.0") }, "start 10.0.1.0 is outside"},
		{"end outside", func(c *SubnetConfig) { c.End = ip("10.1.0.0") }, "end 10.1.0.0 is outside"},
		{"start after end", func(c *SubnetConfig) { c.Start, c.End = ip("10.0.0.50"), ip("10.0.0.40") }, "start 10.0.0.50 is after end 10.0.0.40"},
		{"start after default end", func(c *SubnetConfig) { c.Start = ip("10.0.0.255") }, "is after end"},
		{"reserved outside", func(c *SubnetConfig) { c.Reserved = r("10.0.0.250-10.0.1.5") }, "reserved range 10.0.0.250-10.0.1.5 is not inside"},
		{"excluded outside", func(c *SubnetConfig) { c.Excluded = r("10.0.9.1") }, "excluded range 10.0.9.1 is not inside"},
		{"excluded other family", func(c *SubnetConfig) { c.Excluded = r("fd00::1") }, "not inside"},
		{"reversed range", func(c *SubnetConfig) { c.Reserved = []Range{{First: ip("10.0.0.9"), Last: ip("10.0.0.2")}} }, "is after last"},
		{"mixed range", func(c *SubnetConfig) { c.Excluded = []Range{{First: ip("10.0.0.9"), Last: ip("fd00::2")}} }, "different families"},
		{"empty range", func(c *SubnetConfig) { c.Excluded = []Range{{}} }, "missing address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := v4cfg()
			tc.mutate(&c)
			err := New().AddSubnet(c)
			if tc.substr == "" {
				wantErr(t, err, nil, "")
				return
			}
			wantErr(t, err, ErrInvalidConfig, tc.substr)
		})
	}
}

func TestAddSubnetDuplicateAndOverlap(t *testing.T) {
	a := newWith(t, v4cfg())
	wantErr(t, a.AddSubnet(v4cfg()), ErrInvalidConfig, "already exists")
	c := v4cfg()
	c.Name, c.Prefix, c.Gateway = "other", pfx("10.0.0.128/25"), netip.Addr{}
	wantErr(t, a.AddSubnet(c), ErrInvalidConfig, `overlaps subnet "pods-v4" (10.0.0.0/24) of network "pods"; subnets of one network may share only an identical prefix`)
	c.Network = "elsewhere"
	wantErr(t, a.AddSubnet(c), ErrInvalidConfig, "subnets may share addresses only within one network")
	c.Prefix = pfx("10.0.0.0/24")
	wantErr(t, a.AddSubnet(c), ErrInvalidConfig, "subnets may share addresses only within one network")
	if got := a.Subnets(); len(got) != 1 {
		t.Fatalf("refused subnets were added: %v", got)
	}
}

// Subnets of one network may share an identical prefix when their windows
// are disjoint and neither hands out the other's gateway: the admission
// webhook's rule, which the allocator enforces again for writes that
// bypassed it.
func TestSharedPrefixWindows(t *testing.T) {
	base := func(name, start, end string) SubnetConfig {
		return SubnetConfig{Name: name, Network: "pods", Prefix: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.1"), Start: ip(start), End: ip(end)}
	}
	a := newWith(t, base("low", "10.0.0.10", "10.0.0.99"))
	wantErr(t, a.AddSubnet(base("high", "10.0.0.100", "10.0.0.200")), nil, "")
	wantErr(t, a.AddSubnet(base("mid", "10.0.0.90", "10.0.0.110")), ErrInvalidConfig,
		`window 10.0.0.90-10.0.0.110 overlaps subnet "high"'s window 10.0.0.100-10.0.0.200 in the shared prefix 10.0.0.0/24`)
	gwIn := base("gw-in", "10.0.0.201", "10.0.0.250")
	gwIn.Gateway = ip("10.0.0.50")
	wantErr(t, a.AddSubnet(gwIn), ErrInvalidConfig, `gateway 10.0.0.50 is inside subnet "low"'s window`)
	holdsGW := base("holds-gw", "10.0.0.1", "10.0.0.9")
	holdsGW.Gateway = ip("10.0.0.254")
	wantErr(t, a.AddSubnet(holdsGW), ErrInvalidConfig, `window 10.0.0.1-10.0.0.9 holds subnet "high"'s gateway 10.0.0.1`)

	// A window widened into a neighbour's is refused like an overlapping add.
	wantErr(t, a.UpdateSubnet(base("low", "10.0.0.10", "10.0.0.150")), ErrInvalidConfig, `overlaps subnet "high"'s window`)
	if cfg, _ := a.Subnet("low"); cfg.End != ip("10.0.0.99") {
		t.Errorf("refused update changed the window: end %s", cfg.End)
	}
}

// AddSubnet with records publishes the subnet and its holdings together:
// the recorded addresses are never free, and records that cannot be placed
// are reported without losing the others.
func TestAddSubnetWithRecords(t *testing.T) {
	a := New()
	c := v4cfg()
	c.Start, c.End = ip("10.0.0.2"), ip("10.0.0.4")
	recs := []Record{
		{Subnet: "pods-v4", Addr: ip("10.0.0.2"), State: Allocated, Owner: "ns/a"},
		{Subnet: "pods-v4", Addr: ip("10.0.0.3"), State: Retained, Owner: "ns/b"},
		{Subnet: "pods-v4", Addr: ip("10.0.0.3"), State: Allocated, Owner: "ns/c"},
		{Subnet: "other", Addr: ip("10.0.0.4"), State: Allocated, Owner: "ns/d"},
	}
	var rb *RebuildError
	if err := a.AddSubnet(c, recs...); !errors.As(err, &rb) || len(rb.Problems) != 2 {
		t.Fatalf("AddSubnet with a duplicate and a foreign record = %v, want a RebuildError with 2 problems", err)
	}
	if r, err := a.Lookup("pods-v4", ip("10.0.0.3")); err != nil || r.Owner != "ns/b" || r.State != Retained {
		t.Errorf("10.0.0.3 = %+v, %v; want retained for ns/b", r, err)
	}
	if got := allocN(t, a, "pods-v4", "ns/e", 1)[0]; got != ip("10.0.0.4") {
		t.Errorf("first free address %s, want 10.0.0.4 (the recorded ones are held)", got)
	}
	if _, err := a.AllocateIn("pods-v4", "ns/f"); !errors.Is(err, ErrExhausted) {
		t.Errorf("allocation after the window is full: %v, want ErrExhausted", err)
	}
}

func TestDefaultWindow(t *testing.T) {
	tests := []struct {
		prefix      string
		first, last string
		total       uint64
	}{
		{"10.0.0.0/24", "10.0.0.1", "10.0.0.254", 254},
		{"10.0.0.0/30", "10.0.0.1", "10.0.0.2", 2},
		{"fd00::/120", "fd00::1", "fd00::ff", 255},
		{"fd00::/127", "fd00::1", "fd00::1", 1},
		{"fd00::/64", "fd00::1", "fd00::ffff:ffff:ffff:ffff", ^uint64(0)},
		{"10.0.0.0/8", "10.0.0.1", "10.255.255.254", 1<<24 - 2},
	}
	for _, tc := range tests {
		t.Run(tc.prefix, func(t *testing.T) {
			a := newWith(t, SubnetConfig{Name: "s", Network: "n", Prefix: pfx(tc.prefix)})
			st := stats(t, a, "s")
			if st.Total != tc.total || st.Available != tc.total {
				t.Fatalf("stats %+v, want total %d", st, tc.total)
			}
			wantErr(t, a.Assign("s", ip(tc.first), "o"), nil, "")
			wantErr(t, a.Assign("s", ip(tc.last), "o"), nil, "")
			_, err := a.AllocateIn("s", "o")
			if tc.total == 2 || tc.total == 1 {
				wantErr(t, err, ErrExhausted, "no free address in ["+tc.first+", "+tc.last+"]")
			}
		})
	}
}

func TestUpdateSubnet(t *testing.T) {
	a := newWith(t, v4cfg())
	held := allocN(t, a, "pods-v4", "o", 10) // 10.0.0.2 .. 10.0.0.11
	c := v4cfg()
	c.Excluded = []Range{rng(t, "10.0.0.5-10.0.0.9")}
	c.Reserved = []Range{rng(t, "10.0.0.10-10.0.0.20")}
	wantErr(t, a.UpdateSubnet(c), nil, "")

	st := stats(t, a, "pods-v4")
	want := Stats{Total: 253 - 5, Reserved: 11, Used: 10, Stranded: 5, Available: 253 - 5 - 11 - 3}
	if st != want {
		t.Fatalf("stats after update %+v, want %+v", st, want)
	}
	// The excluded allocation is kept; once released it is never handed out again.
	wantErr(t, a.Release("pods-v4", held[3], "o"), nil, "") // 10.0.0.5
	wantErr(t, a.Assign("pods-v4", held[3], "o"), ErrExcluded, "address 10.0.0.5 is excluded (excluded range)")
	next, err := a.AllocateIn("pods-v4", "o")
	wantErr(t, err, nil, "")
	if next != ip("10.0.0.21") {
		t.Fatalf("next-fit gave %s, want 10.0.0.21 (after reserved range)", next)
	}

	bad := c
	bad.Prefix = pfx("10.0.1.0/24")
	wantErr(t, a.UpdateSubnet(bad), ErrInvalidConfig, "cannot change")
	bad = c
	bad.Name = "nope"
	wantErr(t, a.UpdateSubnet(bad), ErrUnknownSubnet, `"nope"`)
	bad = c
	bad.Start = ip("10.0.0.200")
	bad.End = ip("10.0.0.100")
	wantErr(t, a.UpdateSubnet(bad), ErrInvalidConfig, "after end")

	// Moving the subnet to another network re-indexes it.
	moved := c
	moved.Network = "other"
	wantErr(t, a.UpdateSubnet(moved), nil, "")
	if _, err := a.Allocate(Request{Owner: "x", Network: "other", Families: []family.Family{family.IPv4}}); err != nil {
		t.Fatalf("allocate in new network: %v", err)
	}
	_, err = a.Allocate(Request{Owner: "x", Network: "pods", Families: []family.Family{family.IPv4}})
	wantErr(t, err, ErrUnknownNetwork, `"pods"`)
}

func TestRemoveSubnet(t *testing.T) {
	a := newWith(t, v4cfg())
	addr := allocN(t, a, "pods-v4", "o", 1)[0]
	wantErr(t, a.RemoveSubnet("pods-v4"), ErrInUse, "1 address(es) still held")
	wantErr(t, a.Retain("pods-v4", addr, "o"), nil, "")
	wantErr(t, a.RemoveSubnet("pods-v4"), ErrInUse, "still held")
	wantErr(t, a.Release("pods-v4", addr, "o"), nil, "")
	wantErr(t, a.RemoveSubnet("pods-v4"), nil, "")
	wantErr(t, a.RemoveSubnet("pods-v4"), ErrUnknownSubnet, "")
	_, err := a.AllocateIn("pods-v4", "o")
	wantErr(t, err, ErrUnknownSubnet, `subnet "pods-v4": no such subnet`)
	if len(a.Subnets()) != 0 || len(a.Networks()) != 0 {
		t.Fatalf("subnets %v networks %v after removal", a.Subnets(), a.Networks())
	}
	wantErr(t, a.AddSubnet(v4cfg()), nil, "") // the name can be reused
}

func TestSubnetConfigIsCopied(t *testing.T) {
	c := v4cfg()
	c.Reserved = []Range{rng(t, "10.0.0.2")}
	a := newWith(t, c)
	c.Reserved[0] = rng(t, "10.0.0.3")
	got, err := a.Subnet("pods-v4")
	wantErr(t, err, nil, "")
	if got.Reserved[0].First != ip("10.0.0.2") {
		t.Fatalf("configuration aliased the caller's slice: %v", got.Reserved)
	}
}
