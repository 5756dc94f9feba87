// Command withdeps links two modules besides estuary's: the release tests
// build it and read its SBOM.
package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"
)

func main() {
	ref, err := name.ParseReference("registry.example/estuary-daemon:0.2.0")
	b, _ := yaml.Marshal(map[string]any{"ref": fmt.Sprint(ref), "err": fmt.Sprint(err)})
	fmt.Print(string(b))
}
