package manager

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/estuary-cni/estuary/internal/netmodel"
)

// Defaults of the cluster-default flags: estuary's behaviour without them
// (Overlay, every family of the pod's network, a StatefulSet's pods keep
// their addresses).
const (
	DefaultNetworkType = "Overlay"
	DefaultIPFamily    = netmodel.IPFamilyNetwork
	DefaultIPRetain    = "true"
)

// PodDefaults are the settings' cluster defaults, which the webhook and the
// allocator both apply (netmodel.Defaults). Empty settings take the
// defaults above; each bad one is an error naming its flag.
func (c Config) PodDefaults() (netmodel.Defaults, error) {
	var d netmodel.Defaults
	var errs []error
	if v := c.DefaultNetworkType; v != "" {
		t, err := netmodel.ParseNetworkType(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", netmodel.FlagDefaultNetworkType, v, err))
		}
		d.NetworkType = t
	}
	if v := c.DefaultIPFamily; v != "" {
		f, err := netmodel.ParseIPFamily(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", netmodel.FlagDefaultIPFamily, v, err))
		}
		d.IPFamily = f
	}
	if v := c.DefaultIPRetain; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %q is not true or false", netmodel.FlagDefaultIPRetain, v, v))
		}
		d.NoStatefulRetain = !b
	}
	return d, errors.Join(errs...)
}
