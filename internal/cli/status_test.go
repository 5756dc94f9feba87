package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/manager"
	"github.com/estuary-cni/estuary/internal/webhook"
)

// statusFixture is a healthy estuary install built as API objects: a
// manager Deployment with its flags, its Lease, the webhook's Service
// endpoints, certificate Secret and configurations, the daemon DaemonSet
// and a Ready daemon pod on each of two nodes that published their status
// (node b with an Established BGP session), and a subnet half used.
type statusFixture struct {
	ns, cfg, nodeA, nodeB, subnet string
	ca                            *testCA
}

const statusSecret = "estuary-webhook-cert"

func newStatusFixture(t *testing.T) *statusFixture {
	t.Helper()
	ns := namespace(t)
	f := &statusFixture{ns: ns, cfg: "estuary-webhook-" + ns, nodeA: ns + "-a", nodeB: ns + "-b", subnet: ns + "-v4", ca: newTestCA(t)}
	f.manager(t)
	f.lease(t, time.Now().Add(-time.Second))
	f.webhook(t)
	f.secret(t, f.ca.serving(t, fmt.Sprintf("estuary-webhook.%s.svc", ns), time.Now().Add(365*24*time.Hour)))
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "estuary-daemon", Labels: map[string]string{nameLabel: "estuary-daemon"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{nameLabel: "estuary-daemon"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{nameLabel: "estuary-daemon"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"status-test": ns},
					Containers: []corev1.Container{{Name: "daemon", Image: "estuary-daemon"}}},
			},
		},
	}
	create(t, ds)
	f.node(t, f.nodeA, "")
	f.node(t, f.nodeB, `{"fabric":[{"address":"10.77.0.1","asn":65000,"state":"Established"}]}`)
	f.daemonPod(t, f.nodeA)
	f.daemonPod(t, f.nodeB)
	subnetWithStatus(t, f.subnet, "10.199.0.0/24", 254, 127)
	return f
}

func (f *statusFixture) manager(t *testing.T) {
	t.Helper()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "estuary-manager", Labels: map[string]string{nameLabel: "estuary-manager"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{nameLabel: "estuary-manager"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{nameLabel: "estuary-manager"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "estuary-manager", Command: []string{"/estuary-manager"},
					Args: []string{"--leader-elect=true", "--leader-election-namespace=" + f.ns, "--webhook-port=9443",
						"--webhook-cert-secret=" + f.ns + "/" + statusSecret, "--webhook-service=estuary-webhook",
						"--webhook-configuration=" + f.cfg}}}},
			},
		},
	}
	create(t, dep)
	dep.Status.Replicas, dep.Status.ReadyReplicas = 1, 1
	if err := k8s.Status().Update(bg(), dep); err != nil {
		t.Fatal(err)
	}
}

// lease writes the leader Lease, renewed at renewed.
func (f *statusFixture) lease(t *testing.T, renewed time.Time) {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := k8s.Get(bg(), client.ObjectKey{Namespace: f.ns, Name: manager.LeaderElectionID}, l)
	l.Namespace, l.Name = f.ns, manager.LeaderElectionID
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1_7c3e"), LeaseDurationSeconds: ptr.To[int32](15),
		RenewTime: &metav1.MicroTime{Time: renewed}}
	if err == nil {
		err = k8s.Update(bg(), l)
	} else {
		err = k8s.Create(bg(), l)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (f *statusFixture) webhook(t *testing.T) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: f.ns, Name: "estuary-webhook-x", Labels: map[string]string{discoveryv1.LabelServiceName: "estuary-webhook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	// Rules on a group nothing uses: the test API server never calls them.
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"status.test.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"things"}}}}
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: f.ca.pem,
		Service: &admissionregistrationv1.ServiceReference{Namespace: f.ns, Name: "estuary-webhook", Path: ptr.To("/x")}}
	none, ignore := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Ignore
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: f.cfg},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "a.validate.estuary.io", ClientConfig: cc, Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}},
			{Name: "b.validate.estuary.io", ClientConfig: cc, Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}},
		}}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: f.cfg},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "pod.mutate.estuary.io", ClientConfig: cc, Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}},
		}}
	create(t, slice, vwc, mwc)
}

// secret writes the certificate Secret with a serving certificate.
func (f *statusFixture) secret(t *testing.T, cert []byte) {
	t.Helper()
	s := &corev1.Secret{}
	err := k8s.Get(bg(), client.ObjectKey{Namespace: f.ns, Name: statusSecret}, s)
	s.Namespace, s.Name = f.ns, statusSecret
	s.Data = map[string][]byte{"ca.crt": f.ca.pem, corev1.TLSCertKey: cert}
	if err == nil {
		err = k8s.Update(bg(), s)
	} else {
		err = k8s.Create(bg(), s)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// node creates a node the DaemonSet selects, with a published daemon
// status and the given bgp-peers annotation.
func (f *statusFixture) node(t *testing.T, name, bgpPeers string) {
	t.Helper()
	st := fmt.Sprintf(`{"version":"v0.0.0-test","conflist":{"path":"/etc/cni/net.d/10-estuary.conflist","installed":true},"fastPath":{"state":%q}}`,
		estuaryv1.FastPathLoaded)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"status-test": f.ns},
		Annotations: map[string]string{estuaryv1.AnnotationDaemonStatus: st}}}
	if bgpPeers != "" {
		n.Annotations[estuaryv1.AnnotationBGPPeers] = bgpPeers
	}
	create(t, n)
}

// annotate sets one annotation of node.
func (f *statusFixture) annotate(t *testing.T, node, key, value string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := k8s.Patch(bg(), n, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

// daemonPod creates a Running, Ready daemon pod on node.
func (f *statusFixture) daemonPod(t *testing.T, node string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "estuary-daemon-" + node[len(node)-1:],
		Labels: map[string]string{nameLabel: "estuary-daemon"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "daemon", Image: "estuary-daemon"}}}}
	create(t, p)
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := k8s.Status().Update(bg(), p); err != nil {
		t.Fatal(err)
	}
}

// status runs `kubectl estuary status` on the fixture's namespace.
func (f *statusFixture) status(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, "", append([]string{"status", "--estuary-namespace", f.ns}, args...)...)
}

// wantProblem runs status and requires it to fail with exit code 3 and an
// error naming object and each of parts.
func (f *statusFixture) wantProblem(t *testing.T, object string, parts ...string) {
	t.Helper()
	out, err := f.status(t)
	if ExitCode(err) != 3 {
		t.Fatalf("status = %v (exit %d), want exit 3 naming %s\n%s", err, ExitCode(err), object, out)
	}
	for _, p := range append([]string{object + ": "}, parts...) {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("status error does not name %q:\n%v", p, err)
		}
	}
	if !strings.Contains(out, "PROBLEM") || !strings.Contains(out, object) {
		t.Errorf("status output has no PROBLEM line for %s:\n%s", object, out)
	}
}

func TestStatusHealthyInstallIsClean(t *testing.T) {
	f := newStatusFixture(t)
	out, err := f.status(t)
	if err != nil {
		t.Fatalf("status on a healthy install = %v\n%s", err, out)
	}
	for _, want := range []string{"Deployment " + f.ns + "/estuary-manager", "held by node-1_7c3e",
		"Service " + f.ns + "/estuary-webhook", "ValidatingWebhookConfiguration " + f.cfg, "MutatingWebhookConfiguration " + f.cfg,
		"2 webhooks, each caBundle verifies the serving certificate", "1 webhook, its caBundle verifies the serving certificate", "Secret " + f.ns + "/" + statusSecret, "DaemonSet " + f.ns + "/estuary-daemon",
		f.nodeA, f.nodeB, "conflist installed", "fast path loaded", "BGP fabric peer 10.77.0.1 Established",
		f.subnet, "127 of 254 addresses in use", "estuary in " + f.ns + " is healthy"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PROBLEM") || strings.Contains(out, "WARNING") {
		t.Errorf("a healthy install has problems or warnings:\n%s", out)
	}

	out, err = f.status(t, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r StatusReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	nodes := 0
	for _, c := range r.Checks {
		if c.Check == "node" && (c.Object == f.nodeA || c.Object == f.nodeB) && c.Level == LevelOK {
			nodes++
		}
	}
	if r.Namespace != f.ns || r.Problems != 0 || nodes != 2 {
		t.Errorf("-o json: namespace %q, %d problems, %d ok nodes; want %s, 0, 2", r.Namespace, r.Problems, nodes, f.ns)
	}
}

func TestStatusNamesNodeWithoutDaemon(t *testing.T) {
	f := newStatusFixture(t)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "estuary-daemon-a"}}
	if err := k8s.Delete(bg(), p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	f.wantProblem(t, f.nodeA, "no estuary-daemon pod")
}

func TestStatusNamesDaemonNotReadyAndConflistNotWritten(t *testing.T) {
	f := newStatusFixture(t)
	p := &corev1.Pod{}
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: f.ns, Name: "estuary-daemon-b"}, p); err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "daemon", RestartCount: 4,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	if err := k8s.Status().Update(bg(), p); err != nil {
		t.Fatal(err)
	}
	f.annotate(t, f.nodeB, estuaryv1.AnnotationDaemonStatus,
		`{"version":"v0.0.0-test","conflist":{"path":"/etc/cni/net.d/10-estuary.conflist","installed":false,"error":"read-only file system"},"fastPath":{"state":"Loaded"}}`)
	f.wantProblem(t, f.nodeB, "daemon pod estuary-daemon-b not ready: Running, container daemon CrashLoopBackOff, 4 restarts",
		"conflist /etc/cni/net.d/10-estuary.conflist not written: read-only file system")
}

func TestStatusNamesBGPPeerNotEstablished(t *testing.T) {
	f := newStatusFixture(t)
	f.annotate(t, f.nodeB, estuaryv1.AnnotationBGPPeers, `{"fabric":[{"address":"10.77.0.1","asn":65000,"state":"Active"}]}`)
	f.wantProblem(t, f.nodeB, "BGP network fabric peer 10.77.0.1 (AS 65000) Active")
	if _, err := f.status(t); err == nil || strings.Contains(err.Error(), "conflist installed") {
		t.Errorf("the error names what is fine, not only the problems: %v", err)
	}
	out, _ := f.status(t, "-o", "json")
	var r StatusReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	for _, c := range r.Checks {
		if c.Object == f.nodeB && (c.Level != LevelProblem || len(c.Problems) != 1) {
			t.Errorf("-o json node %s: level %s, problems %q; want one problem", f.nodeB, c.Level, c.Problems)
		}
	}
}

func TestStatusNamesExpiredCertificate(t *testing.T) {
	f := newStatusFixture(t)
	f.secret(t, f.ca.serving(t, fmt.Sprintf("estuary-webhook.%s.svc", f.ns), time.Now().Add(-time.Hour)))
	f.wantProblem(t, "Secret "+f.ns+"/"+statusSecret, "expired on")
}

func TestStatusNamesCABundleThatDoesNotVerify(t *testing.T) {
	f := newStatusFixture(t)
	other := newTestCA(t)
	f.secret(t, other.serving(t, fmt.Sprintf("estuary-webhook.%s.svc", f.ns), time.Now().Add(365*24*time.Hour)))
	f.wantProblem(t, "ValidatingWebhookConfiguration "+f.cfg, "webhook a.validate.estuary.io: caBundle does not verify the serving certificate")
}

func TestStatusWarnsOnCertificateDueAndRefusedFastPath(t *testing.T) {
	f := newStatusFixture(t)
	f.secret(t, f.ca.serving(t, fmt.Sprintf("estuary-webhook.%s.svc", f.ns), time.Now().Add(20*24*time.Hour)))
	f.annotate(t, f.nodeA, estuaryv1.AnnotationDaemonStatus,
		`{"version":"v0.0.0-test","conflist":{"path":"/etc/cni/net.d/10-estuary.conflist","installed":true},"fastPath":{"state":"Refused","reason":"no BTF"}}`)
	out, err := f.status(t)
	if err != nil {
		t.Fatalf("warnings failed status: %v\n%s", err, out)
	}
	for _, want := range []string{"WARNING", "under --cert-warn 30d", "fast path refused by the kernel: no BTF", "2 warnings"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
}

func TestStatusNamesStaleLease(t *testing.T) {
	f := newStatusFixture(t)
	f.lease(t, time.Now().Add(-2*time.Minute))
	f.wantProblem(t, "Lease "+f.ns+"/"+manager.LeaderElectionID, "stale: held by node-1_7c3e, last renewed 2m0s ago")
}

func TestStatusNamesExhaustedSubnet(t *testing.T) {
	f := newStatusFixture(t)
	setUsed(t, f.subnet, 254, 254)
	f.wantProblem(t, f.subnet, "exhausted: 254 of 254 addresses in use (100.0%), 0 available")
	setUsed(t, f.subnet, 254, 240)
	f.wantProblem(t, f.subnet, "near exhaustion: 240 of 254 addresses in use (94.5%)")
	if out, err := f.status(t, "--subnet-threshold", "95"); err != nil {
		t.Fatalf("94.5%% used under --subnet-threshold 95: %v\n%s", err, out)
	}
}

func TestStatusNamesNetworkConditionFalse(t *testing.T) {
	f := newStatusFixture(t)
	nw := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: f.ns + "-bgp"}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](64600),
		NodeSelector: map[string]string{"status-test": f.ns},
		BGPPeers:     []estuaryv1.BGPPeer{{Address: "10.77.0.1", ASN: 65000}}}}
	create(t, nw)
	nw.Status.Conditions = []metav1.Condition{{Type: estuaryv1.ConditionBGPPeersEstablished, Status: metav1.ConditionFalse,
		Reason: "PeersDown", Message: "node-2: 10.77.0.1 Active", LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(bg(), nw); err != nil {
		t.Fatal(err)
	}
	f.wantProblem(t, f.ns+"-bgp", "BGPPeersEstablished False (PeersDown): node-2: 10.77.0.1 Active")
}

// TestStatusWaitReturnsOnceClean: with --wait, status polls while a
// node has no daemon (saying so on stderr) and succeeds once its pod runs.
func TestStatusWaitReturnsOnceClean(t *testing.T) {
	f := newStatusFixture(t)
	if err := k8s.Delete(bg(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "estuary-daemon-a"}},
		client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waiting := &signalWriter{seen: make(chan struct{})}
	var out bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader(""), Out: &out, Err: waiting}, func() (*rest.Config, error) { return cfg, nil })
	root.SetArgs([]string{"status", "--estuary-namespace", f.ns, "--wait=1m"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(bg()) }()
	select {
	case <-waiting.seen:
	case err := <-done:
		t.Fatalf("status --wait returned %v before waiting\n%s", err, out.String())
	}
	if !strings.Contains(waiting.String(), f.nodeA+": no estuary-daemon pod") {
		t.Errorf("stderr while waiting = %q, want the problem named", waiting.String())
	}
	f.daemonPod(t, f.nodeA)
	ctx, cancel := context.WithTimeout(bg(), 50*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("status --wait = %v after the daemon came\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatal("status --wait did not return after the daemon came")
	}
}

// TestStatusDefaultsMatchTheManager: the names status assumes when the
// manager's flags are silent are the manager's own.
func TestStatusDefaultsMatchTheManager(t *testing.T) {
	if leaderLease != manager.LeaderElectionID || defaultWebhookSvc != manager.DefaultWebhookService || defaultWebhookCfg != webhook.ConfigurationName {
		t.Errorf("status assumes lease %q, service %q, configuration %q; the manager uses %q, %q, %q",
			leaderLease, defaultWebhookSvc, defaultWebhookCfg, manager.LeaderElectionID, manager.DefaultWebhookService, webhook.ConfigurationName)
	}
}

// signalWriter closes seen at its first write.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.once.Do(func() { close(w.seen) })
	return w.buf.Write(p)
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// testCA issues serving certificates as the manager's rotator does.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "estuary-webhook-ca"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serving issues a PEM serving certificate for dns that ends at notAfter.
func (ca *testCA) serving(t *testing.T, dns string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: dns},
		DNSNames: []string{dns}, NotBefore: time.Now().Add(-30 * 24 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(errors.Join(errors.New("issue serving certificate"), err))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
