// Command stamped prints the version it was built with: the release tests
// build it with GoBuilder.
package main

import (
	"fmt"

	"github.com/estuary-cni/estuary/internal/version"
)

func main() { fmt.Println(version.Line("stamped")) }
