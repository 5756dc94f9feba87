package podipam

// The address families a request asks for, and a request narrowed to some
// of them: shared by the pod path (pool.go, fixed.go, complete.go).

import (
	"slices"

	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// requestFamilies lists the families req asks for, IPv4 first.
func requestFamilies(req ipam.Request) []family.Family {
	if len(req.Families) > 0 {
		return req.Families
	}
	var out []family.Family
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		if len(req.Subnets[f]) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// narrow limits req to the families fams.
func narrow(req ipam.Request, fams []family.Family) ipam.Request {
	out := req
	out.Families = fams
	out.Subnets = nil
	for f, names := range req.Subnets {
		if slices.Contains(fams, f) {
			if out.Subnets == nil {
				out.Subnets = map[family.Family][]string{}
			}
			out.Subnets[f] = names
		}
	}
	return out
}

func containsFam(fams []family.Family, f family.Family) bool {
	for _, g := range fams {
		if g == f {
			return true
		}
	}
	return false
}

func familiesOfHoldings(hs []holding) []family.Family {
	out := make([]family.Family, len(hs))
	for i, hd := range hs {
		out[i] = hd.lease.Family
	}
	return out
}

func familiesOfLeases(ls []ipam.Lease) []family.Family {
	out := make([]family.Family, len(ls))
	for i, l := range ls {
		out[i] = l.Family
	}
	return out
}
