package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// startRouter writes the router's BIRD configuration and runs bird in the router
// namespace. The peers file holds one session per node, with AS NodeASN.
func (l *Lab) startRouter(ctx context.Context) error {
	dir := l.paths.Router()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	peers := filepath.Join(dir, "bird-peers.conf")
	if err := os.WriteFile(peers, []byte(render.BirdPeers(RouterASN, l.birdPeers())), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", peers, err)
	}
	conf := filepath.Join(dir, "bird.conf")
	// A BGP router ID is 32 bits: the router's IPv4 address, in every family.
	text := render.Bird(render.BirdOptions{RouterID: nth(netip.MustParsePrefix(SwitchCIDR).Addr(), 1).String(), ASN: RouterASN, PeersFile: peers})
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", conf, err)
	}
	sock := l.birdSocket()
	p, err := l.start(l.spec("router-bird", cgroupOf("router"), l.plan.Router.NetNS,
		"bird", "-f", "-c", conf, "-s", sock, "-P", filepath.Join(dir, "bird.pid")))
	if err != nil {
		return err
	}
	return p.WaitReady(ctx, "listening on its control socket", func() error {
		_, err := os.Stat(sock)
		return err
	})
}

func (l *Lab) birdPeers() []render.BirdPeer {
	var out []render.BirdPeer
	for _, n := range l.plan.Nodes {
		out = append(out, render.BirdPeer{Name: n.Name, Address: n.Addr.String(), ASN: NodeASN})
	}
	return out
}

func (l *Lab) birdSocket() string { return filepath.Join(l.paths.Router(), "bird.ctl") }
