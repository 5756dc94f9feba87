//go:build !faultinject

package main

import (
	"flag"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// bindFaultFlags registers nothing: a build without the faultinject tag
// (every release build) has no fault-testing flags.
func bindFaultFlags(*flag.FlagSet, *daemon.Config) {}
