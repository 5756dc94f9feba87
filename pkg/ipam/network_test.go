package ipam

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

// netAlloc has network "pods" with IPv4 subnets a-v4 (/30, 2 addresses),
// b-v4 (/29), z-private (private) and IPv6 subnets a-v6 (/126) and b-v6.
func netAlloc(t *testing.T) *Allocator {
	return newWith(t,
		SubnetConfig{Name: "b-v4", Network: "pods", Prefix: pfx("10.0.1.0/29"), Gateway: ip("10.0.1.1")},
		SubnetConfig{Name: "a-v4", Network: "pods", Prefix: pfx("10.0.0.0/30")},
		SubnetConfig{Name: "z-private", Network: "pods", Prefix: pfx("10.0.9.0/24"), Private: true},
		SubnetConfig{Name: "a-v6", Network: "pods", Prefix: pfx("fd00::/126")},
		SubnetConfig{Name: "b-v6", Network: "pods", Prefix: pfx("fd01::/64"), Gateway: ip("fd01::1")},
		SubnetConfig{Name: "other-v4", Network: "other", Prefix: pfx("10.1.0.0/24")},
	)
}

func leaseAddrs(ls []Lease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Subnet+"="+l.Addr.String())
	}
	return out
}

func TestAllocateOrderAndPrivate(t *testing.T) {
	a := netAlloc(t)
	req := Request{Owner: "p", Network: "pods", Families: []family.Family{family.IPv4}}
	var got []string
	for range 7 {
		ls, err := a.Allocate(req)
		wantErr(t, err, nil, "")
		got = append(got, leaseAddrs(ls)...)
	}
	// a-v4 before b-v4 (name order), the gateway of b-v4 skipped, z-private never used.
	want := []string{"a-v4=10.0.0.1", "a-v4=10.0.0.2", "b-v4=10.0.1.2", "b-v4=10.0.1.3",
		"b-v4=10.0.1.4", "b-v4=10.0.1.5", "b-v4=10.0.1.6"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	_, err := a.Allocate(req)
	wantErr(t, err, ErrExhausted, `network "pods": no IPv4 subnet has a free address (tried "a-v4", "b-v4")`)

	// Named explicitly, the private subnet is used.
	ls, err := a.Allocate(Request{Owner: "p", Network: "pods", Subnets: map[family.Family][]string{family.IPv4: {"z-private"}}})
	wantErr(t, err, nil, "")
	if len(ls) != 1 || ls[0].Subnet != "z-private" || ls[0].Network != "pods" || ls[0].Prefix != pfx("10.0.9.0/24") {
		t.Fatalf("lease %+v", ls)
	}
}

func TestAllocateDualStack(t *testing.T) {
	a := netAlloc(t)
	ls, err := a.Allocate(Request{Owner: "p", Network: "pods", Families: []family.Family{family.IPv6, family.IPv4}})
	wantErr(t, err, nil, "")
	want := []Lease{
		{Subnet: "a-v6", Network: "pods", Family: family.IPv6, Addr: ip("fd00::1"), Prefix: pfx("fd00::/126")},
		{Subnet: "a-v4", Network: "pods", Family: family.IPv4, Addr: ip("10.0.0.1"), Prefix: pfx("10.0.0.0/30")},
	}
	if !slices.Equal(ls, want) {
		t.Fatalf("got %+v, want %+v", ls, want)
	}
	ls, err = a.Allocate(Request{Owner: "p", Subnets: map[family.Family][]string{family.IPv4: {"b-v4"}, family.IPv6: {"b-v6"}}})
	wantErr(t, err, nil, "")
	if ls[0].Family != family.IPv4 || ls[1].Gateway != ip("fd01::1") || ls[0].Gateway != ip("10.0.1.1") {
		t.Fatalf("explicit subnets, default families: %+v", ls)
	}
}

func TestAllocateRollsBack(t *testing.T) {
	a := newWith(t,
		SubnetConfig{Name: "v4", Network: "pods", Prefix: pfx("10.0.0.0/24")},
		SubnetConfig{Name: "v6", Network: "pods", Prefix: pfx("fd00::/127")}, // one address
	)
	_, err := a.Allocate(Request{Owner: "first", Network: "pods", Families: []family.Family{family.IPv6}})
	wantErr(t, err, nil, "")
	before, _ := a.Stats("v4")
	cursor, _ := a.Cursor("v4")

	_, err = a.Allocate(Request{Owner: "p", Network: "pods", Families: []family.Family{family.IPv4, family.IPv6}})
	wantErr(t, err, ErrExhausted, `allocate IPv6 for "p" in network "pods": network "pods": no IPv6 subnet has a free address (tried "v6")`)
	if !strings.Contains(err.Error(), `rolled back IPv4 10.0.0.1 in subnet "v4"`) {
		t.Fatalf("error does not describe the rollback: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Network != "pods" {
		t.Fatalf("errors.As: %+v", e)
	}
	after, _ := a.Stats("v4")
	cursorAfter, _ := a.Cursor("v4")
	if after != before || cursorAfter != cursor {
		t.Fatalf("rollback left state: %+v/%s, want %+v/%s", after, cursorAfter, before, cursor)
	}
	if recs := a.Records(); len(recs) != 1 || recs[0].Owner != "first" {
		t.Fatalf("records after rollback: %v", recs)
	}
	// The explicit-subnet form reports the subnet that failed.
	_, err = a.Allocate(Request{Owner: "p", Subnets: map[family.Family][]string{family.IPv4: {"v4"}, family.IPv6: {"v6"}}})
	wantErr(t, err, ErrExhausted, `subnet "v6" (fd00::/127): no free address in [fd00::1, fd00::1]`)
}

func TestAllocateRequestErrors(t *testing.T) {
	a := netAlloc(t)
	tests := []struct {
		name   string
		req    Request
		kind   error
		substr string
	}{
		{"empty owner", Request{Network: "pods", Families: []family.Family{family.IPv4}}, ErrInvalidRequest, "owner is empty"},
		{"no family", Request{Owner: "p", Network: "pods"}, ErrInvalidRequest, "no family"},
		{"unknown family", Request{Owner: "p", Network: "pods", Families: []family.Family{"IPX"}}, ErrInvalidRequest, `unknown family "IPX"`},
		{"family twice", Request{Owner: "p", Network: "pods", Families: []family.Family{family.IPv4, family.IPv4}}, ErrInvalidRequest, "requested twice"},
		{"unknown network", Request{Owner: "p", Network: "nope", Families: []family.Family{family.IPv4}}, ErrUnknownNetwork, `network "nope"`},
		{"no network", Request{Owner: "p", Families: []family.Family{family.IPv4}}, ErrInvalidRequest, "no network"},
		{"no subnet of family", Request{Owner: "p", Network: "other", Families: []family.Family{family.IPv6}}, ErrUnknownSubnet, "no non-private IPv6 subnet"},
		{"unknown subnet", Request{Owner: "p", Subnets: map[family.Family][]string{family.IPv4: {"zz"}}}, ErrUnknownSubnet, `"zz"`},
		{"subnet of wrong family", Request{Owner: "p", Subnets: map[family.Family][]string{family.IPv6: {"a-v4"}}}, ErrInvalidRequest, "is IPv4, requested for IPv6"},
		{"subnet of other network", Request{Owner: "p", Network: "pods", Subnets: map[family.Family][]string{family.IPv4: {"other-v4"}}},
			ErrInvalidRequest, `belongs to network "other"`},
		{"subnet for unrequested family", Request{Owner: "p", Network: "pods", Families: []family.Family{family.IPv4},
			Subnets: map[family.Family][]string{family.IPv6: {"a-v6"}}}, ErrInvalidRequest, "not requested"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := a.Allocate(tc.req)
			wantErr(t, err, tc.kind, tc.substr)
			if ls != nil {
				t.Fatalf("leases on error: %v", ls)
			}
		})
	}
	if recs := a.Records(); len(recs) != 0 {
		t.Fatalf("failed requests left records: %v", recs)
	}
}

func TestNetworkStats(t *testing.T) {
	a := netAlloc(t)
	allocN(t, a, "a-v4", "o", 2)
	st, err := a.NetworkStats("pods", family.IPv4)
	wantErr(t, err, nil, "")
	// a-v4: 2, b-v4: 6-1 gateway = 5, z-private: 254 (private subnets are counted).
	if want := (Stats{Total: 261, Used: 2, Available: 259}); st != want {
		t.Fatalf("v4 stats %+v, want %+v", st, want)
	}
	st, err = a.NetworkStats("pods", family.IPv6)
	wantErr(t, err, nil, "")
	if st.Total != ^uint64(0) || st.Available != ^uint64(0) {
		t.Fatalf("v6 sums should saturate: %+v", st)
	}
	_, err = a.NetworkStats("nope", family.IPv4)
	wantErr(t, err, ErrUnknownNetwork, "")
	_, err = a.NetworkStats("pods", "x")
	wantErr(t, err, ErrInvalidRequest, "")
	if got := a.Networks(); !slices.Equal(got, []string{"other", "pods"}) {
		t.Fatalf("networks %v", got)
	}
}
