package chart

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/estuary-cni/estuary/internal/daemonsetmetrics"
	"github.com/estuary-cni/estuary/internal/metricscert"
	"github.com/estuary-cni/estuary/internal/servingcert"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// metricsCertDir is where both components mount the metrics Secret.
const metricsCertDir = "/var/run/estuary/metrics-cert"

// checkMetricsCertMounts: the manager rotates the metrics certificate in
// the chart's Secret for both Services' names, mounts it whole and serves
// with it; the daemon mounts only its certificate and key, optionally (it
// starts before the Secret is filled), and serves with them.
func checkMetricsCertMounts(t *testing.T, objs []*unstructured.Unstructured, d *appsv1.Deployment, ds *appsv1.DaemonSet) {
	t.Helper()
	find(t, objs, "Secret", metricsCertSecret)
	find(t, objs, "ConfigMap", metricsCAConfig)
	wantArgs(t, "manager", d.Spec.Template.Spec.Containers[0].Args, []string{
		"--metrics-cert-secret=" + namespace + "/" + metricsCertSecret, "--metrics-cert-dir=" + metricsCertDir,
		fmt.Sprintf("--metrics-cert-dns-names=estuary-manager-metrics.%s.svc,estuary-daemon-metrics.%s.svc", namespace, namespace),
		"--metrics-ca-configmap=" + metricsCAConfig, "--daemonset=" + namespace + "/estuary-daemon",
	}, nil)
	wantArgs(t, "daemon", ds.Spec.Template.Spec.Containers[0].Args, []string{"--metrics-cert-dir=" + metricsCertDir}, nil)
	mv := certVolume(t, "manager", d.Spec.Template.Spec, metricsCertDir)
	if mv.Secret == nil || mv.Secret.SecretName != metricsCertSecret || len(mv.Secret.Items) != 0 {
		t.Errorf("manager metrics-cert volume %+v; want the whole Secret %s", mv, metricsCertSecret)
	}
	dv := certVolume(t, "daemon", ds.Spec.Template.Spec, metricsCertDir)
	var keys []string
	if dv.Secret != nil {
		for _, it := range dv.Secret.Items {
			keys = append(keys, it.Key)
		}
	}
	if dv.Secret == nil || dv.Secret.SecretName != metricsCertSecret || dv.Secret.Optional == nil || !*dv.Secret.Optional ||
		!slices.Equal(keys, []string{"tls.crt", "tls.key"}) {
		t.Errorf("daemon metrics-cert volume %+v; want Secret %s, optional, tls.crt and tls.key only", dv, metricsCertSecret)
	}
}

// certVolume is the volume mounted read-only at path in spec's first
// container.
func certVolume(t *testing.T, what string, spec corev1.PodSpec, path string) corev1.Volume {
	t.Helper()
	i := slices.IndexFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path })
	if i < 0 || !spec.Containers[0].VolumeMounts[i].ReadOnly {
		t.Fatalf("%s: no read-only mount at %s: %+v", what, path, spec.Containers[0].VolumeMounts)
	}
	name := spec.Containers[0].VolumeMounts[i].Name
	j := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	if j < 0 {
		t.Fatalf("%s: no volume %s", what, name)
	}
	return spec.Volumes[j]
}

// TestMetricsCertWithChartRBAC runs the manager's metrics certificate
// rotator, CA publisher and DaemonSet exporter as the manager's
// ServiceAccount with nothing but the chart's RBAC, against the chart's
// own Secret, ConfigMap and DaemonSet: the Secret is filled, the
// ConfigMap receives its CA, and a server reading the mounted files (the
// kubelet's part played by the test) is verified with the published CA as
// each metrics Service's name; the DaemonSet's status is exported, and its
// series removed once the DaemonSet is gone.
func TestMetricsCertWithChartRBAC(t *testing.T) {
	ensureNamespace(t)
	objs := render(t)
	installRBAC(t, objs)
	for _, kn := range [][2]string{{"Secret", metricsCertSecret}, {"ConfigMap", metricsCAConfig}, {"DaemonSet", "estuary-daemon"}} {
		obj := find(t, objs, kn[0], kn[1]).DeepCopy()
		if err := k8s.Create(ctx(t), obj); err != nil {
			t.Fatalf("create %s %s: %v", kn[0], kn[1], err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
	setDaemonSetStatus(t, appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberAvailable: 2, UpdatedNumberScheduled: 3, NumberReady: 2})

	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:estuary-manager", namespace),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	names := []string{"estuary-manager-metrics." + namespace + ".svc", "estuary-daemon-metrics." + namespace + ".svc"}
	certDir := t.TempDir()
	if err := metricscert.Add(mgr, metricscert.Config{
		Secret: types.NamespacedName{Namespace: namespace, Name: metricsCertSecret}, DNSNames: names, CertDir: certDir, ConfigMap: metricsCAConfig,
	}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	exp, err := daemonsetmetrics.New(reg, mgr.GetAPIReader(), types.NamespacedName{Namespace: namespace, Name: "estuary-daemon"}, time.Second, ctrl.Log)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(exp); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		if err := mgr.Start(runCtx); err != nil {
			t.Errorf("manager as estuary-manager: %v", err)
		}
	}()

	var secret corev1.Secret
	var cm corev1.ConfigMap
	testenv.Eventually(t, "the Secret filled and its CA published", 30*time.Second, func() error {
		if err := k8s.Get(ctx(t), client.ObjectKey{Namespace: namespace, Name: metricsCertSecret}, &secret); err != nil {
			return err
		}
		if err := k8s.Get(ctx(t), client.ObjectKey{Namespace: namespace, Name: metricsCAConfig}, &cm); err != nil {
			return err
		}
		if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["ca.crt"]) == 0 || cm.Data["ca.crt"] != string(secret.Data["ca.crt"]) {
			return fmt.Errorf("Secret keys %d, ConfigMap ca.crt %d bytes", len(secret.Data), len(cm.Data["ca.crt"]))
		}
		return nil
	})
	mountSecret(t, certDir, &secret)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
		t.Fatal("the published ca.crt holds no certificate")
	}
	addr := serveTLS(t, servingcert.TLSConfig(certDir))
	for _, name := range append(names, "elsewhere."+namespace+".svc") {
		err := handshake(addr, pool, name)
		if want := name != "elsewhere."+namespace+".svc"; (err == nil) != want {
			t.Errorf("handshake verifying %s with the published CA: %v; want success %t", name, err, want)
		}
	}

	testenv.Eventually(t, "the DaemonSet's status exported", 30*time.Second, func() error {
		want := map[string]float64{"desired": 3, "scheduled": 3, "available": 2, "updated": 3}
		for state, v := range want {
			got, err := gauge(reg, state)
			if err != nil {
				return err
			}
			if got != v {
				return fmt.Errorf("estuary_daemonset_pods{state=%q} = %v, want %v", state, got, v)
			}
		}
		return nil
	})
	if err := k8s.Delete(ctx(t), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "estuary-daemon"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the series removed once the DaemonSet cannot be read", 30*time.Second, func() error {
		if got, err := gauge(reg, "desired"); err == nil {
			return fmt.Errorf("estuary_daemonset_pods{state=\"desired\"} still %v", got)
		}
		return nil
	})
}

// setDaemonSetStatus writes the chart's DaemonSet's status, as the
// DaemonSet controller (absent here) would.
func setDaemonSetStatus(t *testing.T, st appsv1.DaemonSetStatus) {
	t.Helper()
	var ds appsv1.DaemonSet
	if err := k8s.Get(ctx(t), client.ObjectKey{Namespace: namespace, Name: "estuary-daemon"}, &ds); err != nil {
		t.Fatal(err)
	}
	ds.Status = st
	if err := k8s.Status().Update(ctx(t), &ds); err != nil {
		t.Fatalf("DaemonSet status: %v", err)
	}
}

// mountSecret writes s's certificate and key into dir, as the kubelet
// mounts the Secret for the daemon.
func mountSecret(t *testing.T, dir string, s *corev1.Secret) {
	t.Helper()
	for _, k := range []string{servingcert.KeyFileName, servingcert.CertFileName} {
		if err := os.WriteFile(filepath.Join(dir, k), s.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// serveTLS completes TLS handshakes with cfg on loopback until the test
// ends and returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	return lis.Addr().String()
}

// handshake connects to addr verifying its certificate with roots as
// serverName.
func handshake(addr string, roots *x509.CertPool, serverName string) error {
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return c.Close()
}

// gauge is estuary_daemonset_pods{state=state} in reg.
func gauge(reg *prometheus.Registry, state string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "estuary_daemonset_pods" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state {
					return m.GetGauge().GetValue(), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no estuary_daemonset_pods{state=%q}", state)
}
