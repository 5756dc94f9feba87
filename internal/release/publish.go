package release

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is where a release's images and chart go: a host (with port) and
// an optional path, e.g. registry.example:5000/estuary.
type Registry struct {
	Name string
	// Insecure talks plain HTTP to it. A registry on localhost or a loopback
	// address always is (go-containerregistry's rule).
	Insecure bool
}

func (r Registry) nameOptions() []name.Option {
	if r.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// Repository returns the repository of an image below the registry.
func (r Registry) Repository(image string) (name.Repository, error) {
	repo, err := name.NewRepository(r.Name+"/"+image, r.nameOptions()...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("registry %q: %w", r.Name, err)
	}
	return repo, nil
}

// PlainHTTP tells whether helm must be told --plain-http for this registry.
func (r Registry) PlainHTTP() (bool, error) {
	repo, err := r.Repository("charts")
	if err != nil {
		return false, err
	}
	host := repo.RegistryStr()
	if r.Insecure {
		return true, nil
	}
	return isLoopbackHost(host), nil
}

// isLoopbackHost tells whether host[:port] is localhost or a loopback
// address: go-containerregistry speaks HTTP to those by itself, helm needs
// --plain-http.
func isLoopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && ip.IsLoopback()
}

// PushIndex pushes idx as repo:tag, with the credentials of the docker
// config (`docker login`, or none), and returns its reference by digest.
func PushIndex(ctx context.Context, repo name.Repository, tag string, idx v1.ImageIndex) (string, error) {
	ref := repo.Tag(tag)
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", ref, err)
	}
	return repo.Digest(d.String()).String(), nil
}

// WriteLayout writes idx as an OCI image layout in dir, its index named tag
// (org.opencontainers.image.ref.name), replacing what dir held.
func WriteLayout(dir, tag string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("create OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{LabelRefName: tag})); err != nil {
		return fmt.Errorf("write OCI layout %s: %w", dir, err)
	}
	return nil
}
