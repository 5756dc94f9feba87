// Package cniplugins pins the reference CNI plugins (containernetworking's
// loopback, portmap, bandwidth and tuning) that estuary's daemon image
// carries and installs on every node: portmap and bandwidth are chained by
// the daemon's conflist, tuning is there for users to chain
// (--cni-chained-plugins) without installing anything. A release builds them at this version
// (internal/release), and the lab's images carry the same.
package cniplugins

import (
	"maps"
	"slices"
)

// Module and Version pin the plugins' Go module.
const (
	Module  = "github.com/containernetworking/plugins"
	Version = "v1.9.1"
)

// packages are the plugins, binary name to package below Module.
var packages = map[string]string{
	"loopback":  "plugins/main/loopback",
	"portmap":   "plugins/meta/portmap",
	"bandwidth": "plugins/meta/bandwidth",
	"tuning":    "plugins/meta/tuning",
}

// Packages returns the plugins: binary name to package below Module.
func Packages() map[string]string { return maps.Clone(packages) }

// InstallArgs are the arguments of `go install` that build every plugin at
// Version (module/package@version), sorted.
func InstallArgs() []string {
	args := make([]string, 0, len(packages))
	for _, pkg := range packages {
		args = append(args, Module+"/"+pkg+"@"+Version)
	}
	slices.Sort(args)
	return args
}
