package ops

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/pkg/family"
)

// The tags of the base chains' rules.
const (
	tagEstablished = "ct state established,related accept"
	tagInvalid     = "ct state invalid drop"
	tagEgressVmap  = "iifname vmap @" + policy.EgressMap
	tagIngressVmap = "oifname vmap @" + policy.IngressMap
	tagND          = "icmpv6 type 133-136 accept"
)

// baseChain is a base chain of the skeleton and its rules' tags.
type baseChain struct {
	name  string
	hook  *nftables.ChainHook
	rules []string
}

// skeleton: forward decides what crosses the node to or from a pod;
// input, what a pod sends the node itself (its egress, under
// policy.PodToNodePolicy; skeletonOf leaves the egress map out of input
// under policy.PodToNodeAllow). Neither touches what the node sends
// (output): a pod cannot block its own node.
var skeleton = []baseChain{
	{policy.ForwardChain, nftables.ChainHookForward, []string{tagEstablished, tagInvalid, tagEgressVmap, tagIngressVmap}},
	{policy.InputChain, nftables.ChainHookInput, []string{tagEstablished, tagND, tagEgressVmap}},
}

// skeletonOf is the skeleton in shape s: under PodToNodeAllow the input
// chain does not jump through the egress map, so what a pod sends its own
// node is admitted whatever its egress policy.
func skeletonOf(s policy.Skeleton) []baseChain {
	out := make([]baseChain, 0, len(skeleton))
	for _, b := range skeleton {
		if b.name == policy.InputChain && s.PodToNode == policy.PodToNodeAllow {
			b.rules = slices.DeleteFunc(slices.Clone(b.rules), func(tag string) bool { return tag == tagEgressVmap })
		}
		out = append(out, b)
	}
	return out
}

func (p *policyBatch) addSkeleton(s policy.Skeleton) {
	t := p.conn.AddTable(p.table)
	vmaps := map[string]*nftables.Set{}
	for _, name := range []string{policy.IngressMap, policy.EgressMap} {
		m := verdictMap(t, name)
		// AddSet fails only on elements, and there are none.
		_ = p.conn.AddSet(m, nil)
		vmaps[name] = m
	}
	accept := nftables.ChainPolicyAccept
	for _, b := range skeletonOf(s) {
		ch := p.conn.AddChain(&nftables.Chain{Name: b.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: b.hook, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		for _, tag := range b.rules {
			p.conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: baseExprs(tag, vmaps), UserData: []byte(tag)})
		}
	}
}

func verdictMap(t *nftables.Table, name string) *nftables.Set {
	return &nftables.Set{Table: t, Name: name, IsMap: true, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict}
}

func vmapElement(veth, chain string) nftables.SetElement {
	return nftables.SetElement{Key: ifname(veth), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

func baseExprs(tag string, vmaps map[string]*nftables.Set) []expr.Any {
	switch tag {
	case tagEstablished:
		return ctStateExprs(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, expr.VerdictAccept)
	case tagInvalid:
		return ctStateExprs(expr.CtStateBitINVALID, expr.VerdictDrop)
	case tagEgressVmap:
		return vmapExprs(expr.MetaKeyIIFNAME, vmaps[policy.EgressMap])
	case tagIngressVmap:
		return vmapExprs(expr.MetaKeyOIFNAME, vmaps[policy.IngressMap])
	case tagND:
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{133}, ToData: []byte{136}},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}
	}
	panic("policy skeleton: no expressions for " + tag)
}

// ctStateExprs: ct state & bits != 0, then the verdict.
func ctStateExprs(bits uint32, v expr.VerdictKind) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: v},
	}
}

func vmapExprs(key expr.MetaKey, m *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
	}
}

// ruleExprs builds a pod chain's rule; added holds the sets this batch
// adds (a rule refers to those by their batch ID as well as by name).
func ruleExprs(r policy.NFRule, added map[string]*nftables.Set) []expr.Any {
	var es []expr.Any
	if r.Set != "" {
		proto, off, size := byte(unix.NFPROTO_IPV4), uint32(16), uint32(4)
		if r.Src {
			off = 12
		}
		if r.Family == family.IPv6 {
			proto, off, size = unix.NFPROTO_IPV6, 24, 16
			if r.Src {
				off = 8
			}
		}
		var id uint32
		if s := added[r.Set]; s != nil {
			id = s.ID
		}
		es = append(es,
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size},
			&expr.Lookup{SourceRegister: 1, SetName: r.Set, SetID: id})
	}
	if r.Protocol != 0 {
		es = append(es,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(r.Protocol)}})
	}
	if r.From != 0 {
		from, to := binaryutil.BigEndian.PutUint16(r.From), binaryutil.BigEndian.PutUint16(r.To)
		es = append(es, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
		if r.From == r.To {
			es = append(es, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: from})
		} else {
			es = append(es, &expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: from, ToData: to})
		}
	}
	es = append(es, verdictExprs(r)...)
	switch r.Verdict {
	case policy.Return:
		es = append(es, &expr.Verdict{Kind: expr.VerdictReturn})
	case policy.Drop:
		es = append(es, &expr.Verdict{Kind: expr.VerdictDrop})
	case policy.Goto:
		es = append(es, &expr.Verdict{Kind: expr.VerdictGoto, Chain: r.Goto})
	}
	return es
}

// chainImage renders a base chain for comparison with the skeleton.
func chainImage(c *nftables.Chain, tags []string) string {
	var hook, prio, pol int64 = -1, -1, -1
	if c.Hooknum != nil && c.Priority != nil {
		hook, prio = int64(*c.Hooknum), int64(*c.Priority)
	}
	if c.Policy != nil {
		pol = int64(*c.Policy)
	}
	return fmt.Sprintf("chain %s type %s hook %d prio %d policy %d {%s}\n", c.Name, c.Type, hook, prio, pol,
		strings.Join(tags, "; "))
}

// skeletonImage is what the base chains read back as when they are
// estuary's in shape s, sorted like the read-back.
func skeletonImage(s policy.Skeleton) string {
	accept := nftables.ChainPolicyAccept
	var imgs []string
	for _, b := range skeletonOf(s) {
		imgs = append(imgs, chainImage(&nftables.Chain{Name: b.name, Type: nftables.ChainTypeFilter,
			Hooknum: b.hook, Priority: nftables.ChainPriorityFilter, Policy: &accept}, b.rules))
	}
	slices.Sort(imgs)
	return strings.Join(imgs, "")
}
