package netmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/estuary-cni/estuary/pkg/family"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Prefix is the label prefix of every node label key of a network domain.
// Keys under it that do not start with one of the managed name prefixes
// below (e.g. labels a user or another component put there) are not
// domain labels (Managed).
const Prefix = "networking.estuary.io/"

// Name prefixes of the managed keys, after Prefix.
const (
	attachedName = "network-"
	ipv4Name     = "ipv4-available-"
	ipv6Name     = "ipv6-available-"
)

// Label values.
const (
	// ValueAttached marks a network attached to the node.
	ValueAttached = "attached"
	// ValueTrue and ValueFalse say whether a family still has a free address.
	ValueTrue  = "true"
	ValueFalse = "false"
)

// maxNameLen is the longest name part (after the prefix) a label key may have.
const maxNameLen = validation.LabelValueMaxLength // 63, the same limit

// hashLen is the number of hex digits of the name's hash in a shortened key.
const hashLen = 10

// NetworkKey is the label key saying that network is attached to a node:
// networking.estuary.io/network-<network>.
func NetworkKey(network string) string { return key(attachedName, network) }

// AvailableKey is the label key saying whether network still has a free
// address of family f: networking.estuary.io/ipv4-available-<network> (or
// ipv6-available-).
func AvailableKey(network string, f family.Family) string {
	if f == family.IPv6 {
		return key(ipv6Name, network)
	}
	return key(ipv4Name, network)
}

// key builds Prefix + namePrefix + network. When that name part would be
// longer than 63 characters, the network's name is cut and followed by "-"
// and the first 10 hex digits of its SHA-256, so distinct long names still
// get distinct keys and the key stays stable for a given name.
func key(namePrefix, network string) string {
	name := namePrefix + network
	if len(name) <= maxNameLen {
		return Prefix + name
	}
	sum := sha256.Sum256([]byte(network))
	keep := maxNameLen - len(namePrefix) - 1 - hashLen
	cut := strings.TrimRight(network[:keep], "-.")
	return Prefix + namePrefix + cut + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// Managed reports whether k is a domain label key: NetworkKey or
// AvailableKey of some network.
func Managed(k string) bool {
	name, ok := strings.CutPrefix(k, Prefix)
	if !ok {
		return false
	}
	return strings.HasPrefix(name, attachedName) || strings.HasPrefix(name, ipv4Name) || strings.HasPrefix(name, ipv6Name)
}
