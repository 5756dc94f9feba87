package scale

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// pidsOf returns the processes whose command name (/proc/<pid>/comm) is
// comm; the host's /proc sees the lab's containers too.
func pidsOf(comm string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			out = append(out, pid)
		}
	}
	return out, nil
}

// onePid is the one process named comm.
func onePid(comm string) (int, error) {
	pids, err := pidsOf(comm)
	if err != nil {
		return 0, err
	}
	if len(pids) != 1 {
		return 0, fmt.Errorf("processes named %s: %v, want exactly one", comm, pids)
	}
	return pids[0], nil
}

// memory is a process's resident set now and at its peak, in bytes, and
// what is resident now of its anonymous memory (the Go heap and runtime)
// and of files (its binary's text and read-only data, mapped from the page
// cache, clean and reclaimable).
type memory struct{ rss, hwm, anon, file int64 }

func memoryOf(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			m.rss = kb * 1024
		case "VmHWM:":
			m.hwm = kb * 1024
		case "RssAnon:":
			m.anon = kb * 1024
		case "RssFile:":
			m.file = kb * 1024
		}
	}
	return m, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's start time; 100 on
// every Linux architecture Go runs on.
const clockTicks = 100

// startTime is when process pid started, from its start time in
// /proc/<pid>/stat (ticks since boot) and the boot time in /proc/stat.
func startTime(pid int) (time.Time, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, fmt.Errorf("stat of process %d: %w", pid, err)
	}
	// The command name may hold spaces: fields are counted after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return time.Time{}, fmt.Errorf("stat of process %d: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// Field 22 of the whole line is the 20th after the name.
	if len(f) < 20 {
		return time.Time{}, fmt.Errorf("stat of process %d: %d fields", pid, len(f))
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("stat of process %d: start time: %w", pid, err)
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, fmt.Errorf("read /proc/stat: %w", err)
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("boot time: %w", err)
			}
			return time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / clockTicks), nil
		}
	}
	return time.Time{}, errors.New("/proc/stat has no btime")
}

// nsClient is an HTTP client whose connections are dialled from inside
// the network namespace at nsPath; certificates are not verified (the
// estuary endpoints' are self-signed).
func nsClient(nsPath string, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // G402: the lab's endpoints are self-signed
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := nsrun.Do(nsPath, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// get fetches u with c, with token as bearer token unless empty, and
// returns the status and the body.
func get(ctx context.Context, c *http.Client, u, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", fmt.Errorf("request %s: %w", u, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("GET %s: read body: %w", u, err)
	}
	return resp.StatusCode, string(b), nil
}

// kernel counts what the data path programmed in a node's network
// namespace, read with iproute2.
type kernel struct {
	FDB         int // FDB entries on the VXLAN device with a remote (dst)
	FDBFlood    int // of them, all-zero MAC entries (the flood group)
	Neighbours  int // neighbour entries on the VXLAN device
	ProxyNeigh  int // proxy neighbour entries on the node
	Routes      int // routes in estuary's tables (1000-1999)
	RoutesTotal int // routes in every table
	Device      string
}

var tableRe = regexp.MustCompile(`\btable (\d+)\b`)

// readKernel counts the kernel entries in network namespace netns
// (a name under /var/run/netns) on VXLAN device dev.
func readKernel(ctx context.Context, netns, dev string) (kernel, error) {
	k := kernel{Device: dev}
	fdb, err := command(ctx, "bridge", "-n", netns, "fdb", "show", "dev", dev)
	if err != nil {
		return k, err
	}
	for line := range strings.SplitSeq(fdb, "\n") {
		if strings.Contains(line, " dst ") {
			k.FDB++
			if strings.HasPrefix(line, "00:00:00:00:00:00 ") {
				k.FDBFlood++
			}
		}
	}
	neigh, err := command(ctx, "ip", "-n", netns, "neigh", "show", "dev", dev)
	if err != nil {
		return k, err
	}
	k.Neighbours = countLines(neigh)
	proxy, err := command(ctx, "ip", "-n", netns, "neigh", "show", "proxy")
	if err != nil {
		return k, err
	}
	k.ProxyNeigh = countLines(proxy)
	routes, err := command(ctx, "ip", "-n", netns, "route", "show", "table", "all")
	if err != nil {
		return k, err
	}
	for line := range strings.SplitSeq(routes, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k.RoutesTotal++
		if m := tableRe.FindStringSubmatch(line); m != nil {
			if t, _ := strconv.Atoi(m[1]); t >= 1000 && t <= 1999 {
				k.Routes++
			}
		}
	}
	return k, nil
}

// hasFDB tells whether dev in netns has an FDB entry for mac.
func hasFDB(ctx context.Context, netns, dev, mac string) (bool, error) {
	out, err := command(ctx, "bridge", "-n", netns, "fdb", "show", "dev", dev)
	if err != nil {
		return false, err
	}
	return strings.Contains(out, mac+" "), nil
}

// vxlanDevice is the name of estuary's VXLAN device (estvx<netID>) in
// netns.
func vxlanDevice(ctx context.Context, netns string) (string, error) {
	out, err := command(ctx, "ip", "-n", netns, "-o", "link", "show", "type", "vxlan")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], "estvx") {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			return name, nil
		}
	}
	return "", fmt.Errorf("no estvx VXLAN device in %s", netns)
}

func countLines(s string) int {
	n := 0
	for line := range strings.SplitSeq(s, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

func command(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output() //nolint:gosec // G204: iproute2 with the run's own arguments
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}
