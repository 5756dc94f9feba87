package scale

import (
	"os"
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
