package ops

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

func kernelRule(r desired.Rule) *netlink.Rule {
	r = r.Canonical()
	kr := netlink.NewRule()
	kr.Priority = r.Priority
	kr.Table = r.Table
	kr.Family = afOfFamily(r.Family)
	if r.Src.IsValid() {
		kr.Src = ipNet(r.Src)
	}
	kr.Mark = r.Mark
	if r.Mask != 0 {
		mask := r.Mask
		kr.Mask = &mask
	}
	return kr
}

func (h *Rules) add(r desired.Rule) error {
	if err := h.nl.RuleAdd(kernelRule(r)); err != nil && !ignore(err, unix.EEXIST) {
		return fmt.Errorf("add %s: %w", r, err)
	}
	return nil
}

func (h *Rules) del(r desired.Rule) error {
	if err := h.nl.RuleDel(kernelRule(r)); err != nil && !ignore(err, unix.ENOENT) {
		return fmt.Errorf("delete %s: %w", r, err)
	}
	return nil
}

func (h *Rules) read() ([]desired.Rule, error) {
	var out []desired.Rule
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := retryDump("rules", func() ([]netlink.Rule, error) { return h.nl.RuleList(fam) })
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			rule := desired.Rule{Priority: max(r.Priority, 0), Table: r.Table, Mark: r.Mark, Family: fromAF(fam)}
			if r.Mask != nil {
				rule.Mask = *r.Mask
			}
			if r.Src != nil {
				rule.Src = prefixOf(r.Src, fam)
			}
			out = append(out, rule)
		}
	}
	return out, nil
}
