// Package kubeclient owns the API client rate limit the manager and the
// node daemon share: its flags (--kube-client-qps, --kube-client-burst, as
// hybridnet names them), its check and its application to a rest.Config.
package kubeclient

import (
	"flag"
	"fmt"
	"strconv"

	"k8s.io/client-go/rest"
)

// Defaults of the rate limit: controller-runtime's, what both binaries used
// before the flags existed.
const (
	DefaultQPS   = 20
	DefaultBurst = 30
)

// BindFlags registers --kube-client-qps and --kube-client-burst on fs,
// writing into qps and burst; who names the binary in the help text.
func BindFlags(fs *flag.FlagSet, qps *float32, burst *int, who string) {
	*qps, *burst = DefaultQPS, DefaultBurst
	fs.Func("kube-client-qps", fmt.Sprintf("requests per second the %s's API client sustains (default %d)", who, DefaultQPS), func(v string) error {
		q, err := strconv.ParseFloat(v, 32)
		if err != nil {
			return fmt.Errorf("not a number: %w", err)
		}
		*qps = float32(q)
		return nil
	})
	fs.IntVar(burst, "kube-client-burst", DefaultBurst, fmt.Sprintf("requests the %s's API client may send at once above --kube-client-qps", who))
}

// Validate checks a rate limit, naming each bad flag; 0 stands for the
// default.
func Validate(qps float32, burst int) []error {
	var errs []error
	if qps < 0 {
		errs = append(errs, fmt.Errorf("--kube-client-qps=%g: must be positive (0: %d)", qps, DefaultQPS))
	}
	if burst < 0 {
		errs = append(errs, fmt.Errorf("--kube-client-burst=%d: must be positive (0: %d)", burst, DefaultBurst))
	}
	return errs
}

// Apply is a copy of kube carrying the rate limit (0: the default); nil
// when kube is.
func Apply(kube *rest.Config, qps float32, burst int) *rest.Config {
	if kube == nil {
		return nil
	}
	out := rest.CopyConfig(kube)
	out.QPS, out.Burst = qps, burst
	if out.QPS == 0 {
		out.QPS = DefaultQPS
	}
	if out.Burst == 0 {
		out.Burst = DefaultBurst
	}
	return out
}
