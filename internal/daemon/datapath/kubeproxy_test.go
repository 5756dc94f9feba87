package datapath

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestParseMasqueradeBit(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       int
		err        error // nil: no error; errAny: any error
	}{
		{"kubeadm iptables", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" +
			"iptables:\n  masqueradeAll: false\n  masqueradeBit: 14\nmode: \"\"\n", 14, nil},
		{"ipvs uses the iptables bit", "mode: ipvs\niptables:\n  masqueradeBit: 12\n", 12, nil},
		{"nftables", "mode: nftables\niptables:\n  masqueradeBit: 3\nnftables:\n  masqueradeBit: 9\n", 9, nil},
		{"bit 0", "iptables:\n  masqueradeBit: 0\n", 0, nil},
		{"bit 31", "iptables:\n  masqueradeBit: 31\n", 31, nil},
		{"json", `{"iptables":{"masqueradeBit":5}}`, 5, nil},
		{"unset", "iptables:\n  masqueradeAll: true\n", 0, ErrNoMasqueradeBit},
		{"nftables mode, only iptables set", "mode: nftables\niptables:\n  masqueradeBit: 3\n", 0, ErrNoMasqueradeBit},
		{"empty", "", 0, ErrNoMasqueradeBit},
		{"too big", "iptables:\n  masqueradeBit: 32\n", 0, errAny},
		{"negative", "iptables:\n  masqueradeBit: -1\n", 0, errAny},
		{"not a number", "iptables:\n  masqueradeBit: fourteen\n", 0, errAny},
		{"not yaml", "iptables: [", 0, errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMasqueradeBit([]byte(tc.conf))
			switch {
			case tc.err == nil && (err != nil || got != tc.want):
				t.Fatalf("= %d, %v; want %d", got, err, tc.want)
			case errors.Is(tc.err, errAny) && err == nil:
				t.Fatalf("= %d; want an error", got)
			case tc.err != nil && !errors.Is(tc.err, errAny) && !errors.Is(err, tc.err):
				t.Fatalf("err = %v; want %v", err, tc.err)
			}
		})
	}
}

var errAny = errors.New("any error")

func FuzzParseMasqueradeBit(f *testing.F) {
	for _, s := range []string{
		"iptables:\n  masqueradeBit: 14\n", "mode: nftables\nnftables:\n  masqueradeBit: 9\n",
		`{"iptables":{"masqueradeBit":5}}`, "iptables: [", "masqueradeBit: 99", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, conf []byte) {
		bit, err := ParseMasqueradeBit(conf)
		if err != nil {
			if bit != 0 {
				t.Fatalf("error %v with bit %d", err, bit)
			}
			return
		}
		if bit < 0 || bit > 31 || MarkOf(bit) == 0 || MarkOf(bit)&(MarkOf(bit)-1) != 0 {
			t.Fatalf("bit %d (mark %#x) is not one bit of a 32-bit mark", bit, MarkOf(bit))
		}
	})
}

func TestKubeProxyMasqueradeBit(t *testing.T) {
	ctx := context.Background()
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"}, Data: data}
	}
	empty := fake.NewClientBuilder().Build()
	if bit, err := KubeProxyMasqueradeBit(ctx, empty, 12); bit != 12 || err != nil {
		t.Errorf("configured 12: %d, %v", bit, err)
	}
	if bit, err := KubeProxyMasqueradeBit(ctx, empty, -1); bit != 14 || err == nil {
		t.Errorf("no ConfigMap: %d, %v; want 14 with the reason", bit, err)
	}
	withBit := fake.NewClientBuilder().WithObjects(cm(map[string]string{"config.conf": "iptables:\n  masqueradeBit: 10\n"})).Build()
	if bit, err := KubeProxyMasqueradeBit(ctx, withBit, -1); bit != 10 || err != nil {
		t.Errorf("ConfigMap with bit 10: %d, %v", bit, err)
	}
	noKey := fake.NewClientBuilder().WithObjects(cm(map[string]string{"other": "x"})).Build()
	if bit, err := KubeProxyMasqueradeBit(ctx, noKey, -1); bit != 14 || err == nil {
		t.Errorf("ConfigMap without config.conf: %d, %v; want 14 with the reason", bit, err)
	}
	if m := MarkOf(14); m != 0x4000 {
		t.Errorf("MarkOf(14) = %#x", m)
	}
}
