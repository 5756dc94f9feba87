//go:build !faultinject

package main

import (
	"flag"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// bindFaultFlags registers nothing: a build without the faultinject tag
// (every release build) has no fault-testing flags and injects no fault.
func bindFaultFlags(*flag.FlagSet) func(logr.Logger, *rest.Config) {
	return func(logr.Logger, *rest.Config) {}
}
