// Package policystatus is the manager's report of the policy objects that
// no node can enforce as written: what policytranslate's Problems functions
// (NetworkPolicyProblems, ClusterPolicyProblems, AdminNetworkPolicyProblems,
// BaselineAdminNetworkPolicyProblems) find in an object, which the nodes'
// daemons drop or narrow for that object alone.
//
// A NetworkPolicy has no status: one with problems gets a Warning Event,
// reason PolicyNotEnforced, whose note names each field and what the nodes
// do instead. It is written once per generation and problem set (a resync
// or a change that leaves both alone writes nothing; a new leader writes
// each once more); a NetworkPolicy without problems gets none.
//
// A ClusterNetworkPolicy (policy.networking.k8s.io/v1beta1), and an
// AdminNetworkPolicy or BaselineAdminNetworkPolicy (v1alpha1), gets the
// status condition Accepted: True, reason Accepted, when every part of it
// is enforced; False, reason NotEnforcedAsWritten, with the problems in
// the message, when not. network-policy-api leaves the conditions to each
// implementation; Accepted is the Gateway API's name for "the
// implementation read this and will act on it". The condition carries the
// object's generation as its observedGeneration and is written, with a
// merge patch under optimistic locking, only when it changes. A kind is
// watched only when the API server serves it at the version estuary reads
// (looked at when the manager starts).
//
// The gauge estuary_policy_objects_not_enforced counts, by kind, the
// objects with problems. Like every controller of the manager it runs on
// the leader only.
package policystatus
