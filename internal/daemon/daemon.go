// Package daemon owns the node agent's lifecycle: it wires the pieces of the
// estuary daemon together, starts them in order and stops them cleanly.
//
// Run sets the node sysctls, starts an informer cache of this node's
// IPInstances and the address waiter over it (ipwait), the pod plumbing
// backend (podnet), and the CNI server (cniserver) on its unix socket with
// its endpoint store; then it installs the estuary-cni binary and the
// conflist the container runtime reads, and serves /healthz. When its context
// ends it stops the server (the socket is removed, the store closed) and the
// cache. The installed binary and conflist stay: a restarting daemon must not
// make the node's network unready.
package daemon

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/ipwait"
	"github.com/estuary-cni/estuary/internal/daemon/podnet"
	"github.com/estuary-cni/estuary/internal/sysctl"
)

// log is the daemon's logger; controller-runtime's delegating logger, so the
// command's SetLogger applies.
var log = crlog.Log.WithName("daemon")

// nodeSysctls are the host settings the daemon needs before any pod: the
// node routes between pods and the rest of the network. The per-veth
// settings (proxy_arp, forwarding, IPv6's) are podnet's, written per pod.
var nodeSysctls = []sysctl.Setting{{Key: "net/ipv4/ip_forward", Value: "1"}}

// Run runs the node daemon until ctx ends or a part of it fails. It returns
// nil after a clean stop on ctx's end.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	cfg = cfg.withDefaults()
	log.Info("starting", "node", cfg.NodeName, "hostNetns", cfg.HostNetns)
	if err := sysctl.Write(cfg.HostNetns, nodeSysctls); err != nil {
		return fmt.Errorf("node sysctls: %w", err)
	}
	log.Info("node sysctls set", "sysctls", sysctl.List(nodeSysctls))

	ctx, cancel := context.WithCancel(ctx)
	parts := newRunning()
	defer func() {
		cancel()
		parts.wait()
	}()

	waiter, err := startCache(ctx, cfg, parts)
	if err != nil {
		return err
	}
	srv, err := startServer(cfg, waiter, parts)
	if err != nil {
		return err
	}
	log.Info("cni server listening", "socket", cfg.SocketPath, "state", cfg.StatePath)
	stopErr := run(ctx, cfg, parts)
	cancel()
	return errors.Join(stopErr, closeServer(srv))
}

// run installs the plugin, serves health and waits for the end.
func run(ctx context.Context, cfg Config, parts *running) error {
	if err := install(cfg); err != nil {
		return err
	}
	if err := startHealth(ctx, cfg, parts); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case err := <-parts.failed:
		return err
	}
}

// startCache builds the cache of this node's IPInstances, registers the
// address waiter with it and starts it.
func startCache(ctx context.Context, cfg Config, parts *running) (*ipwait.Waiter, error) {
	scheme := runtime.NewScheme()
	if err := estuaryv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	c, err := cache.New(cfg.Kube, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&estuaryv1.IPInstance{}: {Label: labels.SelectorFromSet(labels.Set{estuaryv1.LabelNode: cfg.NodeName})},
	}})
	if err != nil {
		return nil, fmt.Errorf("ipinstance cache: %w", err)
	}
	w, err := ipwait.New(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("address waiter: %w", err)
	}
	parts.goFunc("ipinstance cache", func() error { return c.Start(ctx) })
	go func() {
		if c.WaitForCacheSync(ctx) {
			log.Info("ipinstance cache synced")
			close(parts.synced)
		}
	}()
	return w, nil
}

// startServer opens the CNI server over the podnet backend and serves it.
func startServer(cfg Config, addrs podnet.Addresses, parts *running) (*cniserver.Server, error) {
	backend, err := podnet.New(podnet.Config{
		HostNetns: cfg.HostNetns, Addresses: addrs, AddressTimeout: cfg.AddressTimeout, MTU: cfg.MTU,
	})
	if err != nil {
		return nil, fmt.Errorf("pod network backend: %w", err)
	}
	srv, err := cniserver.New(cniserver.Config{SocketPath: cfg.SocketPath, StatePath: cfg.StatePath, Backend: backend})
	if err != nil {
		return nil, fmt.Errorf("cni server: %w", err)
	}
	parts.goFunc("cni server", srv.Serve)
	return srv, nil
}

func closeServer(srv *cniserver.Server) error {
	if err := srv.Close(); err != nil {
		return fmt.Errorf("close cni server: %w", err)
	}
	return nil
}

// install puts the plugin binary and the conflist in place.
func install(cfg Config) error {
	wrote, err := InstallBinary(cfg.CNIBinarySource, cfg.CNIBinDir)
	if err != nil {
		return fmt.Errorf("install cni binary: %w", err)
	}
	log.Info("cni binary installed", "from", cfg.CNIBinarySource, "dir", cfg.CNIBinDir, "name", PluginType, "changed", wrote)
	wrote, err = InstallConflist(cfg.CNIConfDir, NewConflist(cfg.SocketPath, cfg.AddressTimeout))
	if err != nil {
		return fmt.Errorf("install conflist: %w", err)
	}
	log.Info("conflist installed", "dir", cfg.CNIConfDir, "name", ConflistName, "changed", wrote)
	return nil
}

// startHealth serves /healthz when an address is configured.
func startHealth(ctx context.Context, cfg Config, parts *running) error {
	if cfg.HealthAddr == "" || cfg.HealthAddr == "0" {
		return nil
	}
	h, err := newHealth(cfg.SocketPath)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = h.conn.Close()
	}()
	go func() {
		select {
		case <-parts.synced:
			h.synced.Store(true)
		case <-ctx.Done():
		}
	}()
	addr, done, err := serveHealth(ctx, cfg.HealthAddr, h)
	if err != nil {
		return err
	}
	parts.goFunc("health probe", func() error { return <-done })
	log.Info("serving health probe", "address", addr, "path", "/healthz")
	return nil
}
