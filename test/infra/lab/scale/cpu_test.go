package scale

import (
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseCPUReadsUserAndSystemTime(t *testing.T) {
	// The command name holds a space and a ')': fields count after the last one.
	line := "4242 (kube api) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 12 0 1000 0 0"
	got, err := parseCPU([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 4.0 {
		t.Errorf("parseCPU = %v s, want 4 (250 + 150 ticks)", got)
	}
	if _, err := parseCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("parseCPU of a short line: no error")
	}
	if _, err := parseCPU([]byte("no name here")); err == nil {
		t.Error("parseCPU without a command name: no error")
	}
}

func TestCPUUsedCountsARestartedProcessFromItsStart(t *testing.T) {
	before := map[string]map[int]float64{"etcd": {10: 5}, "estuary-manager": {20: 7}}
	after := map[string]map[int]float64{"etcd": {10: 8}, "estuary-manager": {21: 2}}
	got := cpuUsed(before, after)
	if got["etcd"] != 3 || got["estuary-manager"] != 2 {
		t.Errorf("cpuUsed = %v, want etcd 3, estuary-manager 2", got)
	}
	s := cpuPerPod(got, 1000, 10*time.Second)
	if !strings.HasPrefix(s, "5.0 ms in all, 0.50 cores") || !strings.Contains(s, "etcd 3.0, estuary-manager 2.0") {
		t.Errorf("cpuPerPod = %q", s)
	}
	if s := cpuByProcess(got); s != "5.0 s in all (etcd 3.0, estuary-manager 2.0)" {
		t.Errorf("cpuByProcess = %q", s)
	}
}

func TestReservationsFillSubnetsInOrder(t *testing.T) {
	for _, c := range []struct {
		i      int
		subnet int
		addr   string
	}{{0, 0, "10.84.0.2"}, {253, 0, "10.84.0.255"}, {254, 0, "10.84.1.0"}, {reservedPerSubnet - 1, 0, "10.84.253.233"}, {reservedPerSubnet, 1, "10.85.0.2"}} {
		sn, a, err := reservedAt(c.i)
		if err != nil || sn != c.subnet || a.String() != c.addr {
			t.Errorf("reservedAt(%d) = %d, %s, %v; want %d, %s", c.i, sn, a, err, c.subnet, c.addr)
		}
	}
	ipi, err := reservation(reservedPerSubnet + 300)
	if err != nil {
		t.Fatal(err)
	}
	if ipi.Spec.Subnet != "scale-reserved-1" || ipi.Spec.Address.IP != "10.85.1.46/16" || ipi.Spec.Address.Gateway != "10.85.0.1" ||
		!ipi.Spec.Reserved || ipi.Spec.Binding.Owner.Name != "reserved-261" {
		t.Errorf("reservation = %+v", ipi.Spec)
	}
	if _, _, err := reservedAt(200 * reservedPerSubnet); err == nil {
		t.Error("reservedAt past 10.255.0.0/16: no error")
	}
}

// TestMemoryOfSplitsTheResidentSet reads this test process's memory: its
// resident set is its anonymous and file pages (and shared memory, none
// here), and its peak is at least what it holds now.
func TestMemoryOfSplitsTheResidentSet(t *testing.T) {
	m, err := memoryOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.anon <= 0 || m.file <= 0 || m.hwm < m.rss {
		t.Fatalf("memory %+v: want anonymous and file pages, and a peak of at least the RSS", m)
	}
	if d := m.rss - m.anon - m.file; d < 0 || d > 1<<20 {
		t.Errorf("RSS %d is not anonymous %d + files %d (+ shared memory)", m.rss, m.anon, m.file)
	}
}

// TestHeapAllocReadsTheRuntimesHeapProfile reads the live heap from this
// process's own heap profile, as net/http/pprof serves it with gc=1 and
// debug=1, while it holds 64 MiB it allocated: the figure includes them and
// is no larger than what the runtime maps for its heap.
func TestHeapAllocReadsTheRuntimesHeapProfile(t *testing.T) {
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = byte(i)
	}
	srv := httptest.NewServer(pprof.Handler("heap"))
	defer srv.Close()
	code, body, err := get(t.Context(), srv.Client(), srv.URL+"?gc=1&debug=1", "")
	if err != nil || code != 200 {
		t.Fatalf("heap profile: HTTP %d, %v", code, err)
	}
	n, err := heapAlloc(body)
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if n < int64(len(held)) || uint64(n) > ms.HeapSys {
		t.Errorf("HeapAlloc %d: want at least the %d bytes held and at most HeapSys %d", n, len(held), ms.HeapSys)
	}
	runtime.KeepAlive(held)
	if _, err := heapAlloc("heap profile: 0: 0 [0: 0] @ heap/1048576\n"); err == nil {
		t.Error("a profile without MemStats: no error")
	}
	if _, err := heapAlloc("# HeapAlloc = many\n"); err == nil || !strings.Contains(err.Error(), "many") {
		t.Errorf("a HeapAlloc that is no number: error %v, want it named", err)
	}
}
