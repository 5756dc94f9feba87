package kubeclient

import (
	"flag"
	"io"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestBindFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		qps     float32
		burst   int
		wantErr string
	}{
		{nil, DefaultQPS, DefaultBurst, ""},
		{[]string{"--kube-client-qps=7.5", "--kube-client-burst=15"}, 7.5, 15, ""},
		{[]string{"--kube-client-qps=fast"}, 0, 0, `invalid value "fast" for flag -kube-client-qps`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var qps float32
		var burst int
		BindFlags(fs, &qps, &burst, "daemon")
		err := fs.Parse(c.args)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want %q", c.args, err, c.wantErr)
			}
			continue
		}
		if err != nil || qps != c.qps || burst != c.burst {
			t.Errorf("%v: qps %g burst %d err %v, want %g %d", c.args, qps, burst, err, c.qps, c.burst)
		}
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	errs := Validate(-1, -2)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "--kube-client-qps=-1") || !strings.Contains(errs[1].Error(), "--kube-client-burst=-2") {
		t.Errorf("Validate(-1, -2) = %v", errs)
	}
	if errs := Validate(0, 0); errs != nil {
		t.Errorf("Validate(0, 0) = %v, want none", errs)
	}
}

func TestApplyCopies(t *testing.T) {
	kube := &rest.Config{Host: "https://api:6443", QPS: 1, Burst: 2}
	got := Apply(kube, 0, 80)
	if got.QPS != DefaultQPS || got.Burst != 80 || got.Host != kube.Host {
		t.Errorf("Apply = QPS %g burst %d host %q", got.QPS, got.Burst, got.Host)
	}
	if kube.QPS != 1 || kube.Burst != 2 {
		t.Errorf("Apply changed its input: QPS %g burst %d", kube.QPS, kube.Burst)
	}
	if Apply(nil, 1, 1) != nil {
		t.Error("Apply(nil) is not nil")
	}
}
