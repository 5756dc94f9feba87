package metricscert

import (
	"bytes"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

func caPEM(t *testing.T, name string) []byte {
	t.Helper()
	chain, _, err := certutil.GenerateSelfSignedCertKey(name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, rest := pem.Decode(chain) // the leaf; its CA follows
	block, _ := pem.Decode(rest)
	return pem.EncodeToMemory(block)
}

// TestBundleKeepsThePreviousCA: the first CA is published alone; a renewed
// CA comes first with the previous one after it while it is valid, and
// alone once it expired; a bundle that starts with the current CA is left
// as it is; a Secret without a PEM certificate is an error naming the key.
func TestBundleKeepsThePreviousCA(t *testing.T) {
	a, b := caPEM(t, "a"), caPEM(t, "b")
	now := time.Now()
	got, err := Bundle(a, nil, now)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("first: %q, %v; want a alone", got, err)
	}
	got, err = Bundle(b, a, now)
	if err != nil || !bytes.Equal(got, append(append([]byte{}, b...), a...)) {
		t.Fatalf("renewed: %q, %v; want b then a", got, err)
	}
	again, err := Bundle(b, got, now)
	if err != nil || !bytes.Equal(again, got) {
		t.Fatalf("published again: %q, %v; want unchanged", again, err)
	}
	got, err = Bundle(b, a, now.Add(2*365*24*time.Hour)) // certutil's CAs live a year
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("after a expired: %q, %v; want b alone", got, err)
	}
	if _, err := Bundle([]byte("not a certificate"), nil, now); err == nil || !strings.Contains(err.Error(), CAKey) {
		t.Errorf("garbage CA: %v; want an error naming %s", err, CAKey)
	}
}
