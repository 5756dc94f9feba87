package metricscert

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// publisher copies the Secret's CA into the ConfigMap: every fast interval
// until the ConfigMap holds it, then every slow one. It reads both objects
// straight from the API server (get by name, no cache of every ConfigMap
// and Secret).
type publisher struct {
	reader     client.Reader
	writer     client.Writer
	secret     types.NamespacedName
	configMap  types.NamespacedName
	fast, slow time.Duration
	log        logr.Logger
}

// NeedLeaderElection is false: every replica publishes; the writes agree.
func (*publisher) NeedLeaderElection() bool { return false }

// Start publishes until ctx ends.
func (p *publisher) Start(ctx context.Context) error {
	for {
		wait := p.slow
		done, err := p.publish(ctx, time.Now())
		if err != nil {
			p.log.Error(err, "publish the metrics CA", "secret", p.secret, "configMap", p.configMap)
		}
		if !done {
			wait = p.fast
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// publish writes the CA bundle into the ConfigMap unless it is there, and
// reports whether the ConfigMap now holds the Secret's CA.
func (p *publisher) publish(ctx context.Context, now time.Time) (bool, error) {
	var s corev1.Secret
	if err := p.reader.Get(ctx, p.secret, &s); err != nil {
		return false, fmt.Errorf("read Secret %s: %w", p.secret, err)
	}
	ca := s.Data[CAKey]
	if len(ca) == 0 {
		return false, nil // the rotator has not filled it yet
	}
	var cm corev1.ConfigMap
	if err := p.reader.Get(ctx, p.configMap, &cm); err != nil {
		return false, fmt.Errorf("read ConfigMap %s (the chart creates it): %w", p.configMap, err)
	}
	bundle, err := Bundle(ca, []byte(cm.Data[CAKey]), now)
	if err != nil {
		return false, fmt.Errorf("CA of Secret %s: %w", p.secret, err)
	}
	if string(bundle) == cm.Data[CAKey] {
		return true, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[CAKey] = string(bundle)
	if err := p.writer.Update(ctx, &cm); err != nil {
		return false, fmt.Errorf("update ConfigMap %s: %w", p.configMap, err)
	}
	p.log.Info("published the metrics CA", "configMap", p.configMap)
	return true, nil
}

// Bundle is the CA bundle to publish: current, then the first certificate
// of the published bundle when it is another CA that has not expired (the
// one current replaces, still trusted while the nodes' files catch up).
// When published already starts with current it is returned as it is.
func Bundle(current, published []byte, now time.Time) ([]byte, error) {
	cur := firstCertificate(current)
	if cur == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate", CAKey)
	}
	prev := firstCertificate(published)
	if prev != nil && bytes.Equal(prev.Raw, cur.Raw) {
		return published, nil
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cur.Raw})
	if prev != nil && now.Before(prev.NotAfter) {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: prev.Raw})...)
	}
	return out, nil
}

// firstCertificate is the first certificate PEM block of b that parses.
func firstCertificate(b []byte) *x509.Certificate {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			return c
		}
	}
}
