// Package plugin owns the estuary-cni binary's behaviour: parsing the
// network configuration and CNI_ARGS, forwarding each CNI verb to the
// estuary daemon over its unix socket, and turning the daemon's replies and
// failures into CNI results and CNI error codes.
package plugin

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

const (
	// DefaultDaemonSocket is the daemon's socket when the config names none.
	DefaultDaemonSocket = "/run/estuary/cni.sock"
	// DefaultTimeout bounds one call to the daemon when the config sets none.
	DefaultTimeout = 30 * time.Second
	// maxTimeoutSeconds keeps a misconfigured timeout from hanging the runtime.
	maxTimeoutSeconds = 600
	// maxSocketPath is the longest path a unix socket address can hold.
	maxSocketPath = 107
)

// NetConf is estuary's network configuration.
type NetConf struct {
	types.PluginConf

	// DaemonSocket is the daemon's unix socket (absolute path).
	DaemonSocket string `json:"daemonSocket,omitempty"`
	// TimeoutSeconds bounds each call to the daemon, 1..600.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// Timeout returns the per-call deadline.
func (c *NetConf) Timeout() time.Duration {
	if c.TimeoutSeconds == 0 {
		return DefaultTimeout
	}
	return time.Duration(c.TimeoutSeconds) * time.Second
}

// ParseConfig decodes and validates the configuration read from stdin,
// filling defaults and parsing prevResult. Every failure is a *types.Error.
func ParseConfig(stdin []byte) (*NetConf, error) {
	if len(strings.TrimSpace(string(stdin))) == 0 {
		return nil, types.NewError(types.ErrDecodingFailure, "empty network configuration on stdin", "")
	}
	conf := &NetConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "decode network configuration", err.Error())
	}
	if err := validateConfig(conf); err != nil {
		return nil, err
	}
	if conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "decode prevResult", err.Error())
		}
	}
	return conf, nil
}

func validateConfig(conf *NetConf) error {
	invalid := func(format string, args ...any) error {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(format, args...), "")
	}
	if conf.CNIVersion == "" {
		return invalid("network configuration: cniVersion is missing")
	}
	if conf.Name == "" {
		return invalid("network configuration: name is missing")
	}
	if conf.DaemonSocket == "" {
		conf.DaemonSocket = DefaultDaemonSocket
	}
	if !filepath.IsAbs(conf.DaemonSocket) || len(conf.DaemonSocket) > maxSocketPath || strings.ContainsRune(conf.DaemonSocket, 0) {
		return invalid("network configuration: daemonSocket %q must be an absolute path of at most %d bytes", conf.DaemonSocket, maxSocketPath)
	}
	if conf.TimeoutSeconds < 0 || conf.TimeoutSeconds > maxTimeoutSeconds {
		return invalid("network configuration: timeoutSeconds %d is outside 1..%d", conf.TimeoutSeconds, maxTimeoutSeconds)
	}
	return nil
}

// PodArgs is the pod identity from CNI_ARGS.
type PodArgs struct {
	Namespace string
	Name      string
	UID       string
}

// ParseArgs reads K8S_POD_NAMESPACE, K8S_POD_NAME and K8S_POD_UID from
// CNI_ARGS ("K1=V1;K2=V2"); other keys are ignored. A pair without '=' or
// with an empty key, and a value of those three keys that is not UTF-8 (the
// request to the daemon cannot carry it), is an
// ErrInvalidEnvironmentVariables error.
func ParseArgs(cniArgs string) (PodArgs, error) {
	var p PodArgs
	for pair := range strings.SplitSeq(cniArgs, ";") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return PodArgs{}, types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("CNI_ARGS: %q is not KEY=VALUE", pair), "")
		}
		switch k {
		case "K8S_POD_NAMESPACE", "K8S_POD_NAME", "K8S_POD_UID":
			if !utf8.ValidString(v) {
				return PodArgs{}, types.NewError(types.ErrInvalidEnvironmentVariables,
					fmt.Sprintf("CNI_ARGS: %s=%q is not UTF-8", k, v), "")
			}
		}
		switch k {
		case "K8S_POD_NAMESPACE":
			p.Namespace = v
		case "K8S_POD_NAME":
			p.Name = v
		case "K8S_POD_UID":
			p.UID = v
		}
	}
	return p, nil
}
