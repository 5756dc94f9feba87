package render

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// FlannelUser is the identity flanneld's client certificate names; the
// ClusterRole of FlannelRBAC is bound to it.
const FlannelUser = "flannel"

// FlannelNetConf renders flannel's network configuration
// (/etc/kube-flannel/net-conf.json): the cluster pod ranges, one per family,
// and the VXLAN backend. nftables selects flannel's nftables traffic rules
// instead of its iptables ones, as kube-proxy's mode does for Services.
func FlannelNetConf(pods []netip.Prefix, nftables bool) ([]byte, error) {
	cfg := map[string]any{
		"EnableIPv4":     false,
		"EnableNFTables": nftables,
		"Backend":        map[string]any{"Type": "vxlan"},
	}
	for _, p := range pods {
		if p.Addr().Is4() {
			cfg["Network"], cfg["EnableIPv4"] = p.Masked().String(), true
		} else {
			cfg["IPv6Network"], cfg["EnableIPv6"] = p.Masked().String(), true
		}
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("flannel network configuration: no pod range")
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// FlannelCNI renders the conflist flannel's manifest installs on every node:
// the flannel plugin delegating to bridge with hairpin mode and the pod's
// default route through the bridge, then portmap.
func FlannelCNI() ([]byte, error) {
	cfg := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "cbr0",
		"plugins": []any{
			map[string]any{
				"type":     "flannel",
				"delegate": map[string]any{"hairpinMode": true, "isDefaultGateway": true},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// FlannelRBAC renders what flannel's manifest grants its ServiceAccount, bound
// to FlannelUser: read pods, read and watch nodes, patch node status (the
// lease annotations and the NetworkUnavailable condition).
func FlannelRBAC() ([]byte, error) {
	list := map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items": []any{
			map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1",
				"kind":       "ClusterRole",
				"metadata":   map[string]any{"name": FlannelUser},
				"rules": []any{
					map[string]any{"apiGroups": []string{""}, "resources": []string{"pods"}, "verbs": []string{"get"}},
					map[string]any{"apiGroups": []string{""}, "resources": []string{"nodes"}, "verbs": []string{"get", "list", "watch"}},
					map[string]any{"apiGroups": []string{""}, "resources": []string{"nodes/status"}, "verbs": []string{"patch"}},
				},
			},
			map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1",
				"kind":       "ClusterRoleBinding",
				"metadata":   map[string]any{"name": FlannelUser},
				"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": FlannelUser},
				"subjects":   []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": FlannelUser}},
			},
		},
	}
	return json.MarshalIndent(list, "", "  ")
}
