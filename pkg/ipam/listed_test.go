package ipam

import (
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

func v4List(names ...string) map[family.Family][]string {
	return map[family.Family][]string{family.IPv4: names}
}

// The listed subnets are tried in the order written, not in name order: the
// first is used while it has room, the next once it is full, and when all
// are full the error names each of them.
func TestAllocateListedSubnetsInOrder(t *testing.T) {
	a := netAlloc(t)
	req := Request{Owner: "p", Subnets: v4List("b-v4", "a-v4")}
	var got []string
	for range 7 {
		ls, err := a.Allocate(req)
		wantErr(t, err, nil, "")
		got = append(got, leaseAddrs(ls)...)
		if ls[0].Network != "pods" || ls[0].Family != family.IPv4 {
			t.Fatalf("lease %+v: want network pods, IPv4", ls[0])
		}
	}
	want := []string{"b-v4=10.0.1.2", "b-v4=10.0.1.3", "b-v4=10.0.1.4", "b-v4=10.0.1.5", "b-v4=10.0.1.6",
		"a-v4=10.0.0.1", "a-v4=10.0.0.2"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	before := a.Records()
	_, err := a.Allocate(req)
	wantErr(t, err, ErrExhausted, `network "pods": no requested IPv4 subnet has a free address (tried "b-v4", "a-v4")`)
	if after := a.Records(); !slices.Equal(after, before) {
		t.Fatalf("a failed request changed the records: %v, was %v", after, before)
	}

	// A listed private subnet is used like any other once those before it are full.
	ls, err := a.Allocate(Request{Owner: "p", Network: "pods", Subnets: v4List("a-v4", "b-v4", "z-private")})
	wantErr(t, err, nil, "")
	if got := leaseAddrs(ls); !slices.Equal(got, []string{"z-private=10.0.9.1"}) {
		t.Fatalf("after two full subnets got %v, want the private one", got)
	}
}

// A freed address in the first listed subnet is taken before the next one.
func TestAllocateListedPrefersTheFirstWithRoom(t *testing.T) {
	a := netAlloc(t)
	held := allocN(t, a, "a-v4", "other", 2)
	req := Request{Owner: "p", Subnets: v4List("a-v4", "b-v4")}
	ls, err := a.Allocate(req)
	wantErr(t, err, nil, "")
	if ls[0].Subnet != "b-v4" {
		t.Fatalf("with a-v4 full got %v, want b-v4", leaseAddrs(ls))
	}
	wantErr(t, a.Release("a-v4", held[0], "other"), nil, "")
	ls, err = a.Allocate(req)
	wantErr(t, err, nil, "")
	if got := leaseAddrs(ls); !slices.Equal(got, []string{"a-v4=" + held[0].String()}) {
		t.Fatalf("with room in a-v4 got %v, want its freed address", got)
	}
}

// A dual-stack request with lists is one transaction: when every listed
// subnet of one family is full the other family's address is given back.
func TestAllocateListedDualStackRollsBack(t *testing.T) {
	a := newWith(t,
		SubnetConfig{Name: "v4", Network: "pods", Prefix: pfx("10.0.0.0/24")},
		SubnetConfig{Name: "v6a", Network: "pods", Prefix: pfx("fd00::/127")},   // one address
		SubnetConfig{Name: "v6b", Network: "pods", Prefix: pfx("fd00:1::/127")}, // one address
	)
	req := Request{Owner: "p", Subnets: map[family.Family][]string{family.IPv4: {"v4"}, family.IPv6: {"v6a", "v6b"}}}
	ls, err := a.Allocate(req)
	wantErr(t, err, nil, "")
	if got := leaseAddrs(ls); !slices.Equal(got, []string{"v4=10.0.0.1", "v6a=fd00::1"}) {
		t.Fatalf("first request got %v", got)
	}
	ls, err = a.Allocate(req)
	wantErr(t, err, nil, "")
	if got := leaseAddrs(ls); !slices.Equal(got, []string{"v4=10.0.0.2", "v6b=fd00:1::1"}) {
		t.Fatalf("second request got %v, want v6b once v6a is full", got)
	}
	before := stats(t, a, "v4")
	cursor, _ := a.Cursor("v4")
	_, err = a.Allocate(req)
	wantErr(t, err, ErrExhausted,
		`allocate IPv6 for "p" in network "pods": network "pods": no requested IPv6 subnet has a free address (tried "v6a", "v6b")`)
	if !strings.Contains(err.Error(), `rolled back IPv4 10.0.0.3 in subnet "v4"`) {
		t.Fatalf("error does not describe the rollback: %v", err)
	}
	after := stats(t, a, "v4")
	cursorAfter, _ := a.Cursor("v4")
	if after != before || cursorAfter != cursor {
		t.Fatalf("rollback left state: %+v/%s, want %+v/%s", after, cursorAfter, before, cursor)
	}
}

func TestAllocateListedRequestErrors(t *testing.T) {
	a := netAlloc(t)
	tests := []struct {
		name   string
		req    Request
		kind   error
		substr string
	}{
		{"unknown second subnet", Request{Owner: "p", Subnets: v4List("a-v4", "zz")}, ErrUnknownSubnet, `subnet "zz"`},
		{"second subnet of wrong family", Request{Owner: "p", Subnets: v4List("a-v4", "a-v6")},
			ErrInvalidRequest, `subnet "a-v6" is IPv6, requested for IPv4`},
		{"second subnet of another network", Request{Owner: "p", Subnets: v4List("a-v4", "other-v4")},
			ErrInvalidRequest, `subnet "other-v4" belongs to network "other", not "pods" (the network of subnet "a-v4")`},
		{"subnet outside the named network", Request{Owner: "p", Network: "other", Subnets: v4List("other-v4", "a-v4")},
			ErrInvalidRequest, `subnet "a-v4" belongs to network "pods", not "other"`},
		{"subnet listed twice", Request{Owner: "p", Subnets: v4List("a-v4", "b-v4", "a-v4")},
			ErrInvalidRequest, `name subnet "a-v4" twice`},
		{"list for unrequested family", Request{Owner: "p", Network: "pods", Families: []family.Family{family.IPv6},
			Subnets: v4List("a-v4", "b-v4")}, ErrInvalidRequest, "not requested"},
		{"only empty lists", Request{Owner: "p", Network: "pods", Subnets: map[family.Family][]string{family.IPv4: {}}},
			ErrInvalidRequest, "no family"},
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
	// An empty list is no list: the family comes from the network's public subnets.
	ls, err := a.Allocate(Request{Owner: "p", Network: "pods", Families: []family.Family{family.IPv4},
		Subnets: map[family.Family][]string{family.IPv4: nil}})
	wantErr(t, err, nil, "")
	if got := leaseAddrs(ls); !slices.Equal(got, []string{"a-v4=10.0.0.1"}) {
		t.Fatalf("empty list got %v, want the network's first subnet", got)
	}
}
