package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// cgroup paths (relative to every hierarchy root) of the lab's processes.
func cgroupOf(component string) string { return Prefix + "/" + component }

func (l *Lab) spec(name, cgroup, netnsName string, argv ...string) proc.Spec {
	s := proc.Spec{Name: name, Argv: argv, Dir: l.paths.Root, Cgroup: cgroup,
		LogDir: l.paths.Logs(), RunDir: l.paths.Run()}
	if netnsName != "" {
		s.NetNS = netlab.Path(netnsName)
	}
	return s
}

// startControlPlane runs etcd, kube-apiserver (and the host forwarder to it),
// kube-controller-manager and kube-scheduler, waiting for etcd and the API server.
func (l *Lab) startControlPlane(ctx context.Context, bin string) error {
	cp := l.paths.ControlPlane()
	ns := l.plan.ControlPlane.NetNS
	cg := cgroupOf("control-plane")
	etcd, err := l.start(l.spec("etcd", cg, ns, filepath.Join(bin, "etcd"),
		"--name=lab", "--data-dir="+filepath.Join(cp, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=lab=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn"))
	if err != nil {
		return err
	}
	etcdClient := &http.Client{Timeout: 2 * time.Second,
		Transport: &http.Transport{DialContext: netlab.Dialer(netlab.Path(ns))}}
	if err := etcd.WaitReady(ctx, "healthy", func() error { return httpOK(etcdClient, "http://127.0.0.1:2379/health") }); err != nil {
		return err
	}
	l.p.step("etcd ready")
	api, err := l.start(l.spec("kube-apiserver", cg, ns, l.apiserverArgs(bin)...))
	if err != nil {
		return err
	}
	fwd, err := l.startForwarder(ns, l.plan.ControlPlane.Addr)
	if err != nil {
		return err
	}
	// A forwarder that cannot listen exits at once: fail now, not at the
	// bring-up timeout.
	listen := fmt.Sprintf("127.0.0.1:%d", l.opts.HostAPIPort)
	if err := fwd.WaitReady(ctx, "listening on "+listen, func() error {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		return err
	}
	client, err := l.adminClient()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", l.opts.HostAPIPort)
	if err := api.WaitReady(ctx, "ready", func() error {
		if fwd.Exited() {
			return fmt.Errorf("api forwarder exited: %s", proc.Tail(fwd.Log, 5))
		}
		return httpOK(client, url)
	}); err != nil {
		return err
	}
	l.p.step("kube-apiserver ready")
	return l.startControllers(bin)
}

func (l *Lab) apiserverArgs(bin string) []string {
	k := func(f string) string { return filepath.Join(l.paths.PKI(), f) }
	return []string{filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=" + l.plan.anyAddr(), "--secure-port=" + strconv.Itoa(APIServerPort),
		"--advertise-address=" + l.plan.ControlPlane.Addr.String(),
		"--tls-cert-file=" + k("apiserver.crt"), "--tls-private-key-file=" + k("apiserver.key"),
		"--client-ca-file=" + k("ca.crt"),
		"--kubelet-client-certificate=" + k("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + k("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + k("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + k("sa.pub"),
		"--service-account-signing-key-file=" + k("sa.key"),
		"--service-cluster-ip-range=" + l.plan.joined(func(p *Plan) string { return p.Services.String() }),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		// Webhooks and aggregated APIs are dialled at their Service's endpoints:
		// the control plane runs no kube-proxy, so ClusterIPs are unreachable
		// from it.
		"--enable-aggregator-routing=true",
		"--allow-privileged=true",
		"--profiling=" + strconv.FormatBool(l.opts.Profiling),
		"--v=1",
	}
}

func (l *Lab) startControllers(bin string) error {
	cp := l.paths.ControlPlane()
	k := func(f string) string { return filepath.Join(l.paths.PKI(), f) }
	ns := l.plan.ControlPlane.NetNS
	cg := cgroupOf("control-plane")
	kcm := filepath.Join(cp, "controller-manager.kubeconfig")
	if _, err := l.start(l.spec("kube-controller-manager", cg, ns, append([]string{filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig=" + kcm, "--authentication-kubeconfig=" + kcm, "--authorization-kubeconfig=" + kcm,
		"--bind-address=127.0.0.1", "--leader-elect=false",
		"--service-account-private-key-file=" + k("sa.key"), "--root-ca-file=" + k("ca.crt"),
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file=" + k("ca.crt"), "--cluster-signing-key-file=" + k("ca.key"),
		"--cluster-cidr=" + l.plan.joined(func(p *Plan) string { return p.Pods.String() }),
		"--service-cluster-ip-range=" + l.plan.joined(func(p *Plan) string { return p.Services.String() }),
		"--allocate-node-cidrs=" + strconv.FormatBool(l.opts.CNI == "flannel"), "--profiling=false", "--v=1",
		"--flex-volume-plugin-dir=" + filepath.Join(cp, "volume-plugins")}, l.clientRate()...)...)); err != nil {
		return err
	}
	sched := filepath.Join(cp, "scheduler.kubeconfig")
	_, err := l.start(l.spec("kube-scheduler", cg, ns, append([]string{filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig=" + sched, "--authentication-kubeconfig=" + sched, "--authorization-kubeconfig=" + sched,
		"--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false", "--v=1"}, l.clientRate()...)...))
	return err
}

// startForwarder relays the host's loopback port to the API server at addr
// inside namespace ns (the control plane's, or the kubeadm control-plane
// node's), so the lab's kubeconfig works from the host without any link or
// route into the host's namespace.
func (l *Lab) startForwarder(ns string, addr netip.Addr) (*proc.Proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find lab binary: %w", err)
	}
	return l.start(l.spec("api-forwarder", cgroupOf("forwarder"), "", self, netlab.ForwardCommand,
		fmt.Sprintf("127.0.0.1:%d", l.opts.HostAPIPort), netlab.Path(ns),
		netip.AddrPortFrom(addr, APIServerPort).String()))
}

// adminClient is an HTTPS client with the lab admin's certificate.
func (l *Lab) adminClient() (*http.Client, error) {
	k := func(f string) string { return filepath.Join(l.paths.PKI(), f) }
	caPEM, err := os.ReadFile(k("ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(k("client-admin-host.crt"), k("client-admin-host.key"))
	if err != nil {
		return nil, fmt.Errorf("load admin certificate: %w", err)
	}
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}, nil
}

func httpOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// clientRate returns the API client rate flags of kube-controller-manager and
// kube-scheduler for Options.ControlPlaneQPS, none when it is 0.
func (l *Lab) clientRate() []string {
	q := l.opts.ControlPlaneQPS
	if q <= 0 {
		return nil
	}
	return []string{"--kube-api-qps=" + strconv.Itoa(q), "--kube-api-burst=" + strconv.Itoa(2*q)}
}
