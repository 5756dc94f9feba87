package cli

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func subnetsCmd(o *options) *cobra.Command {
	var out *output
	c := &cobra.Command{
		Use:   "subnets",
		Short: "Usage of every subnet, and of every network by family",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate("subnets"); err != nil {
				return err
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			return subnets(cmd.Context(), k, o.streams, out)
		},
	}
	out = addOutput(c)
	return c
}

// usage adds up counts that may exceed int64 (an IPv6 /64).
type usage struct{ total, used, available big.Int }

func (u *usage) add(sn *estuaryv1.Subnet) {
	u.used.Add(&u.used, big.NewInt(sn.Status.Used))
	for _, f := range []struct {
		dst *big.Int
		s   string
	}{{&u.total, sn.Status.Total}, {&u.available, sn.Status.Available}} {
		if v, ok := new(big.Int).SetString(f.s, 10); ok {
			f.dst.Add(f.dst, v)
		}
	}
}

func subnets(ctx context.Context, k client.Client, s Streams, out *output) error {
	var list estuaryv1.SubnetList
	if err := k.List(ctx, &list); err != nil {
		return fmt.Errorf("list subnets: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b estuaryv1.Subnet) int {
		return strings.Compare(a.Spec.Network+"/"+a.Name, b.Spec.Network+"/"+b.Name)
	})
	table, wide := out.table()
	if !table {
		return out.object(s.Out, &list)
	}
	t := newTable()
	header := "NETWORK\tSUBNET\tCIDR\tTOTAL\tUSED\tAVAILABLE\tUSE%"
	if wide {
		header += "\tGATEWAY\tRESERVED-RANGES\tEXCLUDED-RANGES\tNAT\tPRIVATE"
	}
	t.row("%s\n", header)
	networks := map[string]*usage{}
	var order []string
	for i := range list.Items {
		sn := &list.Items[i]
		var u usage
		u.add(sn)
		t.row("%s\t%s\t%s\t%s\t%d\t%s\t%s", sn.Spec.Network, sn.Name, sn.Spec.Range.CIDR, orDash(sn.Status.Total), sn.Status.Used, orDash(sn.Status.Available), percent(&u))
		if wide {
			t.row("\t%s\t%d\t%d\t%s\t%s", orDash(string(sn.Spec.Range.Gateway)), len(sn.Spec.Range.ReservedIPs), len(sn.Spec.Range.ExcludeIPs),
				natNote(sn.Spec.NATOutgoing), yesNo(sn.Spec.Private))
		}
		t.row("\n")
		key := fmt.Sprintf("%s\tIPv%d", sn.Spec.Network, sn.Spec.Range.Version)
		if networks[key] == nil {
			networks[key] = &usage{}
			order = append(order, key)
		}
		networks[key].add(sn)
	}
	t.row("\nNETWORK\tFAMILY\t\tTOTAL\tUSED\tAVAILABLE\tUSE%%\n")
	for _, key := range order {
		u := networks[key]
		t.row("%s\t\t%s\t%s\t%s\t%s\n", key, u.total.String(), u.used.String(), u.available.String(), percent(u))
	}
	return t.writeTo(s.Out)
}

func percent(u *usage) string {
	if u.total.Sign() == 0 {
		return "-"
	}
	p := new(big.Rat).SetFrac(new(big.Int).Mul(&u.used, big.NewInt(100)), &u.total)
	return p.FloatString(1) + "%"
}

// natNote is a subnet's natOutgoing: yes, no, or "default" (yes on an
// overlay network, no on an underlay one) when the spec leaves it out.
func natNote(nat *bool) string {
	if nat == nil {
		return "default"
	}
	return yesNo(*nat)
}
