package cli

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What the manager runs with when its flags do not say otherwise (they
// match internal/manager's constants and the chart's names; status_test
// compares them).
const (
	leaderLease         = "estuary-manager"
	defaultWebhookSvc   = "estuary-webhook"
	defaultWebhookCfg   = "estuary-webhook"
	managerContainer    = "manager"
	defaultLeaseSeconds = 15
)

// managerArgs are the manager container's --name=value flags.
type managerArgs map[string]string

// argsOf reads the flags of dep's manager container (else its first).
func argsOf(dep *appsv1.Deployment) managerArgs {
	out := managerArgs{}
	ctrs := dep.Spec.Template.Spec.Containers
	if len(ctrs) == 0 {
		return out
	}
	ctr := ctrs[0]
	for _, c := range ctrs {
		if c.Name == managerContainer {
			ctr = c
		}
	}
	args := append(append([]string{}, ctr.Command...), ctr.Args...)
	for i, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		if k, v, eq := strings.Cut(name, "="); eq {
			out[k] = v
		} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[name] = args[i+1]
		} else {
			out[name] = "true"
		}
	}
	return out
}

func (a managerArgs) get(name, def string) string {
	if v := a[name]; v != "" {
		return v
	}
	return def
}

// managerChecks: the Deployment's replicas and the leader Lease.
func managerChecks(ctx context.Context, k client.Reader, ns string, dep *appsv1.Deployment, now time.Time) []StatusCheck {
	if dep == nil {
		b := newCheck("manager", "Deployment "+ns+"/estuary-manager")
		b.problem("not found (no Deployment labelled %s=estuary-manager; --estuary-namespace names where estuary is installed)", nameLabel)
		return []StatusCheck{b.done()}
	}
	b := newCheck("manager", "Deployment "+dep.Namespace+"/"+dep.Name)
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	switch {
	case want == 0:
		b.problem("scaled to 0 replicas: no pod gets an address")
	case dep.Status.ReadyReplicas < want:
		b.problem("%d of %d replicas ready", dep.Status.ReadyReplicas, want)
	default:
		b.fact("%d of %d replicas ready", dep.Status.ReadyReplicas, want)
	}
	return []StatusCheck{b.done(), leaderCheck(ctx, k, argsOf(dep).get("leader-election-namespace", dep.Namespace), now)}
}

// leaderCheck: the Lease is held and was renewed within twice its
// duration (a leader renews every few seconds; the slack forgives some
// clock skew between this machine and the leader's node).
func leaderCheck(ctx context.Context, k client.Reader, ns string, now time.Time) StatusCheck {
	b := newCheck("leader", "Lease "+ns+"/"+leaderLease)
	var l coordinationv1.Lease
	if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: leaderLease}, &l); err != nil {
		if apierrors.IsNotFound(err) {
			b.problem("not found: no manager replica has led")
		} else {
			b.problem("not read: %v", err)
		}
		return b.done()
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	duration := time.Duration(defaultLeaseSeconds) * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if holder == "" {
		b.problem("no leader: the Lease is held by nobody")
		return b.done()
	}
	if l.Spec.RenewTime == nil {
		b.problem("held by %s, never renewed", holder)
		return b.done()
	}
	age := now.Sub(l.Spec.RenewTime.Time).Round(time.Second)
	if age > 2*duration {
		b.problem("stale: held by %s, last renewed %s ago (lease duration %s): no live leader", holder, age, duration)
	} else {
		b.fact("held by %s, renewed %s ago", holder, max(age, 0))
	}
	return b.done()
}

// webhookChecks: the Service has a ready endpoint; both configurations
// carry a caBundle that verifies the serving certificate; its expiry.
func webhookChecks(ctx context.Context, k client.Reader, ns string, dep *appsv1.Deployment, now time.Time, f statusFlags) []StatusCheck {
	if dep == nil {
		return nil
	}
	args := argsOf(dep)
	if args.get("webhook-port", "0") == "0" {
		b := newCheck("webhook", "Deployment "+dep.Namespace+"/"+dep.Name)
		b.fact("not served: the manager runs without --webhook-port")
		return []StatusCheck{b.done()}
	}
	svc := args.get("webhook-service", defaultWebhookSvc)
	cfgName := args.get("webhook-configuration", defaultWebhookCfg)
	secretNS, secretName, _ := strings.Cut(args.get("webhook-cert-secret", ns+"/estuary-webhook-cert"), "/")
	dns := fmt.Sprintf("%s.%s.svc", svc, secretNS)
	out := []StatusCheck{endpointsCheck(ctx, k, dep.Namespace, svc)}
	cert, certCheck := certificateCheck(ctx, k, secretNS, secretName, dns, now, f)
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		out = append(out, caBundleCheck(ctx, k, kind, cfgName, cert, dns))
	}
	return append(out, certCheck)
}

// endpointsCheck counts the webhook Service's ready endpoints.
func endpointsCheck(ctx context.Context, k client.Reader, ns, svc string) StatusCheck {
	b := newCheck("webhook", "Service "+ns+"/"+svc)
	var list discoveryv1.EndpointSliceList
	if err := k.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
		b.problem("endpoints not read: %v", err)
		return b.done()
	}
	ready := 0
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready++
			}
		}
	}
	if ready == 0 {
		b.problem("no ready endpoint: the API server cannot call the webhook")
	} else {
		b.fact("%s ready", plural(ready, "endpoint"))
	}
	return b.done()
}

// certificateCheck reads the serving certificate from the Secret the
// rotator fills and judges its expiry. The certificate is nil when it
// cannot be read.
func certificateCheck(ctx context.Context, k client.Reader, ns, name, dns string, now time.Time, f statusFlags) (*x509.Certificate, StatusCheck) {
	b := newCheck("certificate", "Secret "+ns+"/"+name)
	var s corev1.Secret
	if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		b.problem("not read: %v", err)
		return nil, b.done()
	}
	certs, err := parseCerts(s.Data[corev1.TLSCertKey])
	if err != nil {
		b.problem("%s: %v (the manager's certificate rotator fills it)", corev1.TLSCertKey, err)
		return nil, b.done()
	}
	cert := certs[0]
	left := cert.NotAfter.Sub(now)
	until := fmt.Sprintf("serving certificate for %s valid until %s", dns, cert.NotAfter.UTC().Format(time.RFC3339))
	switch {
	case now.Before(cert.NotBefore):
		b.problem("serving certificate for %s not valid before %s", dns, cert.NotBefore.UTC().Format(time.RFC3339))
	case left <= 0:
		b.problem("serving certificate for %s expired on %s", dns, cert.NotAfter.UTC().Format(time.RFC3339))
	case left < f.certCritical:
		b.problem("%s, %s left (under --cert-critical %s): the rotator has not renewed it", until, days(left), days(f.certCritical))
	case left < f.certWarn:
		b.warn("%s, %s left (under --cert-warn %s): the rotator renews 90 days ahead", until, days(left), days(f.certWarn))
	default:
		b.fact("%s (%s left)", until, days(left))
	}
	return cert, b.done()
}

// caBundleCheck: every webhook of the configuration has a caBundle, and it
// verifies cert for dns. Expiry is certificateCheck's: the chain is
// verified at a moment the certificate is valid.
func caBundleCheck(ctx context.Context, k client.Reader, kind, name string, cert *x509.Certificate, dns string) StatusCheck {
	b := newCheck("webhook", kind+" "+name)
	hooks, err := webhookBundles(ctx, k, kind, name)
	if err != nil {
		b.problem("%v", err)
		return b.done()
	}
	verified := 0
	for _, hook := range slices.Sorted(maps.Keys(hooks)) {
		bundle := hooks[hook]
		if len(bundle) == 0 {
			b.problem("webhook %s has no caBundle: the API server cannot trust the webhook", hook)
			continue
		}
		if cert == nil {
			continue
		}
		if err := verifyCert(bundle, cert, dns); err != nil {
			b.problem("webhook %s: caBundle does not verify the serving certificate: %v", hook, err)
			continue
		}
		verified++
	}
	if verified == len(hooks) && cert != nil {
		if len(hooks) == 1 {
			b.fact("1 webhook, its caBundle verifies the serving certificate")
		} else {
			b.fact("%d webhooks, each caBundle verifies the serving certificate", len(hooks))
		}
	}
	return b.done()
}

// webhookBundles reads each webhook's caBundle from the configuration.
func webhookBundles(ctx context.Context, k client.Reader, kind, name string) (map[string][]byte, error) {
	out := map[string][]byte{}
	var err error
	if kind == "ValidatingWebhookConfiguration" {
		var c admissionregistrationv1.ValidatingWebhookConfiguration
		if err = k.Get(ctx, client.ObjectKey{Name: name}, &c); err == nil {
			for _, h := range c.Webhooks {
				out[h.Name] = h.ClientConfig.CABundle
			}
		}
	} else {
		var c admissionregistrationv1.MutatingWebhookConfiguration
		if err = k.Get(ctx, client.ObjectKey{Name: name}, &c); err == nil {
			for _, h := range c.Webhooks {
				out[h.Name] = h.ClientConfig.CABundle
			}
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, errors.New("not found: the manager's pods are admitted without it")
	case err != nil:
		return nil, fmt.Errorf("not read: %w", err)
	case len(out) == 0:
		return nil, errors.New("no webhook in it")
	}
	return out, nil
}

// verifyCert verifies cert for dns against the CAs of bundle, at a moment
// the certificate is valid.
func verifyCert(bundle []byte, cert *x509.Certificate, dns string) error {
	cas, err := parseCerts(bundle)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	at := cert.NotAfter.Add(-time.Second)
	if now := time.Now(); now.Before(at) && now.After(cert.NotBefore) {
		at = now
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: dns, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// parseCerts parses the PEM certificates in b.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// days renders d in whole days (hours under a day).
func days(d time.Duration) string {
	if d < 24*time.Hour {
		return d.Round(time.Hour).String()
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
