package datapath

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// kube-proxy's configuration as kubeadm publishes it: the ConfigMap
// kube-system/kube-proxy, key config.conf, a KubeProxyConfiguration.
const (
	KubeProxyNamespace = "kube-system"
	KubeProxyConfigMap = "kube-proxy"
	KubeProxyConfigKey = "config.conf"
	// DefaultMasqueradeBit is kube-proxy's own default (mark 0x4000).
	DefaultMasqueradeBit = 14
)

// kubeProxyConfig is the part of a KubeProxyConfiguration estuary reads.
// masqueradeBit sits under the section of the proxy mode in use (iptables,
// nftables; ipvs uses the iptables one).
type kubeProxyConfig struct {
	Mode     string         `json:"mode"`
	IPTables masqueradeConf `json:"iptables"`
	NFTables masqueradeConf `json:"nftables"`
}

type masqueradeConf struct {
	MasqueradeBit *int32 `json:"masqueradeBit"`
}

// ErrNoMasqueradeBit is returned (wrapped) when a configuration sets no
// masqueradeBit: kube-proxy then uses DefaultMasqueradeBit.
var ErrNoMasqueradeBit = errors.New("no masqueradeBit set")

// ParseMasqueradeBit reads kube-proxy's masquerade bit from its
// configuration file (YAML or JSON): nftables.masqueradeBit in nftables
// mode, else iptables.masqueradeBit. It returns ErrNoMasqueradeBit when the
// field is absent, and an error for malformed text or a bit outside 0-31.
func ParseMasqueradeBit(conf []byte) (int, error) {
	var c kubeProxyConfig
	if err := yaml.Unmarshal(conf, &c); err != nil {
		return 0, fmt.Errorf("kube-proxy configuration: %w", err)
	}
	bit := c.IPTables.MasqueradeBit
	field := "iptables.masqueradeBit"
	if c.Mode == "nftables" {
		bit, field = c.NFTables.MasqueradeBit, "nftables.masqueradeBit"
	}
	if bit == nil {
		return 0, fmt.Errorf("kube-proxy configuration (mode %q): %w", c.Mode, ErrNoMasqueradeBit)
	}
	if *bit < 0 || *bit > 31 {
		return 0, fmt.Errorf("kube-proxy configuration: %s %d is outside 0-31", field, *bit)
	}
	return int(*bit), nil
}

// MarkOf returns the firewall mark of masquerade bit bit (0-31).
func MarkOf(bit int) uint32 {
	if bit < 0 || bit > 31 {
		return 0
	}
	return 1 << uint(bit) // #nosec G115 -- bounded to 0-31 above
}

// KubeProxyMasqueradeBit returns configured when it is 0-31; otherwise
// (auto, -1) it reads kube-proxy's ConfigMap through r and returns its
// masqueradeBit. When that fails or sets none it returns
// DefaultMasqueradeBit with the reason, which the caller logs.
func KubeProxyMasqueradeBit(ctx context.Context, r client.Reader, configured int) (int, error) {
	if configured >= 0 && configured <= 31 {
		return configured, nil
	}
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: KubeProxyNamespace, Name: KubeProxyConfigMap}
	if err := r.Get(ctx, key, &cm); err != nil {
		return DefaultMasqueradeBit, fmt.Errorf("configmap %s: %w", key, err)
	}
	conf, ok := cm.Data[KubeProxyConfigKey]
	if !ok {
		return DefaultMasqueradeBit, fmt.Errorf("configmap %s: no key %s", key, KubeProxyConfigKey)
	}
	bit, err := ParseMasqueradeBit([]byte(conf))
	if err != nil {
		return DefaultMasqueradeBit, fmt.Errorf("configmap %s: %w", key, err)
	}
	return bit, nil
}
