package ipwait

import (
	"context"
	"strings"
	"testing"
	"time"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// withMAC is a Bound record of pod default/<pod> on node-a pinning mac, one
// of count addresses.
func withMAC(pod, ip string, count int, mac string) *estuaryv1.IPInstance {
	ipi := instance("n", "default", pod, "uid-"+pod, "node-a", ip, count, estuaryv1.IPInstanceBound)
	ipi.Spec.Address.MAC = mac
	return ipi
}

func TestRecordMAC(t *testing.T) {
	for _, c := range []struct {
		mac  string
		want desired.MAC
		err  string // substring of the error; "": none
	}{
		{mac: ""},
		{mac: "02:42:0a:00:00:07", want: desired.MustParseMAC("02:42:0a:00:00:07")},
		{mac: "0a:58:0a:0a:00:07", want: desired.MustParseMAC("0a:58:0a:0a:00:07")},
		{mac: "02:42:0A:00:00:07", err: "not of the form aa:bb:cc:dd:ee:ff"},
		{mac: "02-42-0a-00-00-07", err: "not of the form aa:bb:cc:dd:ee:ff"},
		{mac: "02:42:0a:00:07", err: "parse MAC"},
		{mac: "00:00:00:00:00:00", err: "not a usable interface address"},
		{mac: "01:00:5e:00:00:01", err: "multicast"},
		{mac: "ff:ff:ff:ff:ff:ff", err: "multicast"},
	} {
		got, err := recordMAC(withMAC("p", "10.9.1.5/24", 1, c.mac))
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("%q: recordMAC = %s, %v; want %s", c.mac, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) ||
			!strings.Contains(err.Error(), "ipinstance 10.9.1.5: spec.address.mac") {
			t.Errorf("%q: recordMAC = %s, %v; want an error naming ipinstance 10.9.1.5, spec.address.mac and %q",
				c.mac, got, err, c.err)
		}
	}
}

func TestSameMAC(t *testing.T) {
	const mac, other = "02:42:0a:00:00:07", "02:42:0a:00:00:08"
	for _, c := range []struct {
		name string
		macs [2]string
		err  []string // substrings of the error; nil: none
	}{
		{name: "none pinned", macs: [2]string{"", ""}},
		{name: "both pin the same", macs: [2]string{mac, mac}},
		{name: "one pins", macs: [2]string{mac, ""},
			err: []string{"ipinstance fd00-9-1--5: spec.address.mac is unset", `ipinstance 10.9.1.5 of the same pod has "` + mac}},
		{name: "different MACs", macs: [2]string{mac, other},
			err: []string{`ipinstance fd00-9-1--5: spec.address.mac is "` + other, `ipinstance 10.9.1.5 of the same pod has "` + mac}},
	} {
		t.Run(c.name, func(t *testing.T) {
			records := []estuaryv1.IPInstance{*withMAC("p", "10.9.1.5/24", 2, c.macs[0]), *withMAC("p", "fd00:9:1::5/64", 2, c.macs[1])}
			err := sameMAC(records)
			if c.err == nil {
				if err != nil {
					t.Fatalf("sameMAC = %v", err)
				}
				return
			}
			for _, s := range c.err {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("sameMAC = %v; want it to contain %q", err, s)
				}
			}
		})
	}
}

// TestWaitReturnsThePinnedMAC: every address of a dual-stack pod whose
// records pin a MAC carries it; records that disagree fail the wait at once,
// naming the records and the field.
func TestWaitReturnsThePinnedMAC(t *testing.T) {
	const mac = "02:42:0a:09:02:05"
	create(t, withMAC("pinned", "10.9.2.5/24", 2, mac))
	create(t, withMAC("pinned", "fd00:9:2::5/64", 2, mac))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	as, err := waiter.Wait(ctx, "default", "pinned", "uid-pinned")
	if err != nil || len(as) != 2 {
		t.Fatalf("Wait = %+v, %v; want two addresses", as, err)
	}
	for _, a := range as {
		if a.MAC != desired.MustParseMAC(mac) {
			t.Errorf("%s: MAC %s, want %s", a.IP, a.MAC, mac)
		}
	}

	create(t, withMAC("split", "10.9.2.6/24", 2, mac))
	create(t, withMAC("split", "fd00:9:2::6/64", 2, ""))
	start := time.Now()
	_, err = waiter.Wait(ctx, "default", "split", "uid-split")
	if err == nil || !strings.Contains(err.Error(), "spec.address.mac") || !strings.Contains(err.Error(), "ipinstance fd00-9-2--6") ||
		!strings.Contains(err.Error(), "ipinstance 10.9.2.6") {
		t.Fatalf("Wait = %v; want an error naming both records and spec.address.mac", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Wait failed only at its deadline, after %s; want at once", time.Since(start))
	}
}
