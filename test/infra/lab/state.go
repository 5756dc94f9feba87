package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// State is the record of a lab, written to <state>/state.json when up starts and
// updated when it ends. Cleanup uses it when present but never depends on it.
type State struct {
	Phase             string          `json:"phase"` // starting, running
	Nodes             int             `json:"nodes"`
	CNI               string          `json:"cni"`
	Bootstrap         string          `json:"bootstrap,omitempty"` // BootstrapLab when empty
	KubernetesVersion string          `json:"kubernetesVersion"`
	ProxyMode         string          `json:"proxyMode"`
	IPFamily          string          `json:"ipFamily,omitempty"` // ipv4 when empty (a lab from before --ip-family)
	HostAPIPort       int             `json:"hostAPIPort"`
	BinDir            string          `json:"binDir"`
	Images            []string        `json:"images"`
	Estuary           *EstuaryState   `json:"estuary,omitempty"`   // with --cni estuary
	Flannel           *FlannelState   `json:"flannel,omitempty"`   // with --cni flannel
	Kubeadm           *KubeadmState   `json:"kubeadm,omitempty"`   // with --bootstrap kubeadm
	Hybridnet         *HybridnetState `json:"hybridnet,omitempty"` // with --cni hybridnet
	Namespaces        []string        `json:"namespaces"`
	StartedAt         time.Time       `json:"startedAt"`
	ReadyAt           time.Time       `json:"readyAt,omitzero"`
}

func (s *State) family() string {
	if s.IPFamily == "" {
		return FamilyIPv4
	}
	return s.IPFamily
}

func loadState(path string) (*State, error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil, fmt.Errorf("read lab state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse lab state %s: %w", path, err)
	}
	return &s, nil
}

func (s *State) save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab state: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	return nil
}
