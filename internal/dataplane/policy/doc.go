// Package policy owns what a node enforces of NetworkPolicy and
// ClusterNetworkPolicy (its Admin and Baseline tiers), as plain values: the
// model (Node: each local pod endpoint's ingress and egress decisions in
// tiers, peers as address sets, ports as numbers), the compiler from that
// model to the desired nftables ruleset of the table `inet estuary-policy`
// (Ruleset), and the pure Diff of a desired ruleset against the kernel's
// table read back (Table) into the operations that make the one the other
// (Ops). It imports neither Kubernetes nor netlink: the translation of API
// objects into a Node happens upstream, and internal/dataplane/ops writes
// Ops into the kernel and reads a Table back.
//
// # Design
//
// Tiers. Each direction of each endpoint is decided in order: the admin
// tier (ClusterNetworkPolicy Admin-tier rules, already in priority order;
// the first that matches decides: Allow admits, Deny drops, Pass skips the
// rest of the tier), then the NetworkPolicy tier (when a NetworkPolicy selects the
// pod for that direction, the union of their rules admits and everything
// else is dropped), and only for a pod no NetworkPolicy isolates in that
// direction the baseline tier (Baseline-tier rules in priority order,
// Allow or Deny); what no tier decides is admitted. Decide is that
// semantics written as a plain function; the compiled ruleset is tested
// against it.
//
// Where the kernel decides. Every pod packet crosses the node through the
// pod's host veth (no bridge): a packet for a local pod leaves through it
// (oifname), a packet from one enters through it (iifname). The base chain
// `forward` (filter hook, priority filter) accepts established and related
// packets first, drops invalid ones, then jumps through the verdict map
// `egress` (iifname -> the source pod's chain) and the verdict map
// `ingress` (oifname -> the destination pod's chain); a pod chain returns
// what it admits and drops the rest, so pod-to-pod traffic on one node
// meets both pods' policy. What a pod sends its own node reaches the base
// chain `input`: by Kubernetes' rule (traffic between a pod and its own
// node is always allowed) it is admitted under PodToNodeAllow, the
// default, and only under PodToNodePolicy does `input` send it through the
// `egress` map (after established/related and IPv6 neighbour discovery,
// which conntrack does not track), so that a pod's egress policy covers its
// node's addresses. Skeleton names that choice; Diff recreates a table of
// the other shape. Traffic the node itself sends to its pods (the output
// hook) is not filtered: by Kubernetes convention a pod cannot block its
// own node, and the kubelet's probes must pass; their replies are
// established. Hence kube-proxy's IPVS mode, which delivers a same-node
// Service connection from the output hook, bypasses the backend's ingress
// policy.
//
// Established flows. Only a flow's first packet meets the pod chains;
// conntrack carries the rest, so a policy change decides new flows and
// leaves established ones running until they end (as iptables-based
// implementations do). The fast path forwards only established flows, so it
// never carries a flow the chains did not admit.
//
// Naming. Pod chains are i-<veth> and e-<veth> (ingress, egress), with a
// -np suffix for the tier after the admin tier when a Pass rule needs a
// chain to jump to. A peer set is named after its rule's ID (p- and 16 hex
// digits of SHA-256, then -4 or -6), not after its content, so a pod that
// joins or leaves a selector changes the elements of one set and no rule.
// Each nftables rule carries its rendering (Rule.String) as user data, and
// the read-back compares those, as the NAT writer does.
//
// Verdicts. Each deciding rule counts into a named counter object, one
// per policy object, direction and verdict (Ruleset.Counters), and each
// drop rule follows a log rule that sends the packet to the netlink log
// group DropLogGroup behind the table's one shared limit object
// (verdicts.go). Counter names appear in rule tags, counts never do.
//
// Pending. An endpoint whose policy is being computed is sent by both maps
// to the chain PendingChain, which drops: a new pod is isolated from its
// first packet, and a pass replaces the entries by its own (pending.go).
//
// Failure costs one endpoint. Compile never fails a node: what it cannot
// compile (a rule Validate rejects, a rule ID naming two peer sets, a bad
// address or a host veth listed twice) closes that endpoint's direction,
// or both, with a chain that drops everything, and is returned beside a
// whole ruleset. Callers validate rules first (Rule.Validate), so that
// nothing gets this far.
//
// Diff and atomicity. Diff yields minimal operations at the granularity of
// a set's elements (flush and refill a set that differs), a chain's rules
// (flush and refill a chain that differs) and a verdict map's entries, and
// the ops layer sends all of them as one netlink batch, which nftables
// applies as one transaction: a packet sees the old policy or the new one,
// never a mix. A table whose skeleton (base chains, maps) differs from
// estuary's is recreated, in the same single batch.
package policy
