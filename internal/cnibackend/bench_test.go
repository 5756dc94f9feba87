package cnibackend

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

const ptpPath = "/usr/lib/cni/ptp"

// BenchmarkAddDel measures one Add and one Del of a pod interface against
// the real kernel: a fake host namespace and one pod namespace, reused.
// The ptp sub-benchmark runs Debian's reference ptp plugin with host-local
// IPAM for the same work (exec'd from a thread inside the fake host, as a
// runtime would exec it), for a ratio.
func BenchmarkAddDel(b *testing.B) {
	b.Run("estuary", benchEstuary)
	b.Run("ptp+host-local", benchPTP)
}

func benchEstuary(b *testing.B) {
	e := newEnv(b)
	pod := benchPodNS(b)
	e.addrs.Set("default", "bench", addr("10.0.0.5/24"))
	a := cniserver.Attachment{ContainerID: "c-bench", IfName: "eth0", Netns: pod,
		PodNamespace: "default", PodName: "bench", PodUID: "uid-bench"}
	ctx := context.Background()
	var add, del time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := e.b.Add(ctx, a); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := e.b.Del(ctx, a); err != nil {
			b.Fatal(err)
		}
		add, del = add+t1.Sub(t0), del+time.Since(t1)
	}
	reportSplit(b, add, del)
}

func benchPTP(b *testing.B) {
	if _, err := os.Stat(ptpPath); err != nil {
		b.Skipf("reference plugin not installed: %v", err)
	}
	e := newEnv(b)
	pod := benchPodNS(b)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench","type":"ptp",`+
		`"ipam":{"type":"host-local","subnet":"10.1.0.0/16","dataDir":%q}}`, b.TempDir())
	run := func(cmd string) {
		c := exec.Command(ptpPath)
		c.Env = []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c-bench", "CNI_NETNS=" + pod,
			"CNI_IFNAME=eth0", "CNI_PATH=/usr/lib/cni", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		c.Stdin = bytes.NewReader([]byte(conf))
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := nsrun.Do(e.host, c.Run); err != nil {
			b.Fatalf("ptp %s: %v\n%s", cmd, err, out.String())
		}
	}
	var add, del time.Duration
	for b.Loop() {
		t0 := time.Now()
		run("ADD")
		t1 := time.Now()
		run("DEL")
		add, del = add+t1.Sub(t0), del+time.Since(t1)
	}
	reportSplit(b, add, del)
}

// benchPodNS is a pod namespace with lo up.
func benchPodNS(b *testing.B) string {
	b.Helper()
	ns := nstest.New(b)
	ipCmd(b, ns, "link", "set", "lo", "up")
	return ns
}

// reportSplit reports the Add and Del shares of each iteration.
func reportSplit(b *testing.B, add, del time.Duration) {
	b.ReportMetric(float64(add.Nanoseconds())/float64(b.N), "add-ns/op")
	b.ReportMetric(float64(del.Nanoseconds())/float64(b.N), "del-ns/op")
}
