package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Sentinel error kinds. Every error about a subnet, an address or a request that this
// package returns matches one of them with errors.Is. There is no kind for reserved
// addresses: they are never an error (next-fit skips them, Assign hands them out).
var (
	// ErrExhausted: no address is left for next-fit allocation.
	ErrExhausted = errors.New("ipam: no free address")
	// ErrOutOfRange: the address is outside the subnet's prefix or outside its
	// allocatable window [Start, End].
	ErrOutOfRange = errors.New("ipam: address out of range")
	// ErrInUse: the address is held by another owner, or the subnet still holds
	// addresses.
	ErrInUse = errors.New("ipam: address in use")
	// ErrExcluded: the address is never allocatable (network, broadcast, gateway or
	// an excluded range).
	ErrExcluded = errors.New("ipam: address excluded")
	// ErrUnknownSubnet: no subnet by that name, or a network without a subnet of the
	// requested family.
	ErrUnknownSubnet = errors.New("ipam: unknown subnet")
	// ErrUnknownNetwork: no subnet belongs to the named network.
	ErrUnknownNetwork = errors.New("ipam: unknown network")
	// ErrNotAllocated: the address is not held by anyone.
	ErrNotAllocated = errors.New("ipam: address not allocated")
	// ErrInvalidConfig: a subnet configuration or a range string is invalid.
	ErrInvalidConfig = errors.New("ipam: invalid configuration")
	// ErrInvalidRequest: a request is malformed (empty owner, unknown or repeated
	// family, subnet of the wrong family or network, subnet listed twice,
	// invalid address).
	ErrInvalidRequest = errors.New("ipam: invalid request")
)

// Error is the error type returned by this package. Kind is one of the sentinel
// errors; the other fields give the context the message is built from.
type Error struct {
	Kind    error        // sentinel kind, matched by errors.Is
	Subnet  string       // subnet name, if the error is about one subnet
	Prefix  netip.Prefix // the subnet's prefix, when it helps the message
	Network string       // network name, for network-wide errors
	Addr    netip.Addr   // the address concerned, if any
	Owner   string       // the owner that made the request, if any
	Holder  string       // the owner currently holding Addr, if any
	Detail  string       // human-readable description, naming the address
	Err     error        // underlying cause, if any
}

// Error renders e as `subnet "name" (prefix): detail[: cause]`.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Subnet != "":
		fmt.Fprintf(&b, "subnet %q", e.Subnet)
		if e.Prefix.IsValid() {
			fmt.Fprintf(&b, " (%s)", e.Prefix)
		}
	case e.Network != "":
		fmt.Fprintf(&b, "network %q", e.Network)
	default:
		b.WriteString("ipam")
	}
	b.WriteString(": ")
	b.WriteString(e.Detail)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the kind and, if present, the underlying cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// RebuildError lists every problem [Allocator.Rebuild] found in its records. The
// state was rebuilt nevertheless: see Rebuild for what is kept.
type RebuildError struct {
	Problems []*Error
}

// maxListed bounds how many problems RebuildError.Error spells out.
const maxListed = 20

// Error names the number of problems and describes the first ones.
func (e *RebuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ipam: rebuild found %d problem(s)", len(e.Problems))
	for i, p := range e.Problems {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-maxListed)
			break
		}
		b.WriteString("; ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, so errors.Is(err, ErrInUse) reports whether any
// problem is of that kind.
func (e *RebuildError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

func invalidConfig(subnet, format string, args ...any) *Error {
	return &Error{Kind: ErrInvalidConfig, Subnet: subnet, Detail: fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) *Error {
	return &Error{Kind: ErrInvalidRequest, Detail: fmt.Sprintf(format, args...)}
}

func unknownSubnet(name string) *Error {
	return &Error{Kind: ErrUnknownSubnet, Subnet: name, Detail: "no such subnet"}
}
