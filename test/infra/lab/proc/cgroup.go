package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CgroupRoot is where the cgroup hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// Hierarchies lists the mounted cgroup hierarchies (v1 controllers, the named
// systemd hierarchy and the unified v2 mount).
func Hierarchies() ([]string, error) {
	ents, err := os.ReadDir(CgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(CgroupRoot, e.Name(), "cgroup.procs")); err == nil {
				out = append(out, filepath.Join(CgroupRoot, e.Name()))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy under %s", CgroupRoot)
	}
	return out, nil
}

// EnsureCgroup creates rel in every hierarchy. In the cpuset hierarchy each new
// level inherits its parent's cpus and mems, without which no task may join.
func EnsureCgroup(rel string) error {
	hs, err := Hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := h
		for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if err := inherit(parent, dir, f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func inherit(parent, dir, file string) error {
	cur, err := os.ReadFile(filepath.Clean(filepath.Join(dir, file)))
	if err != nil || strings.TrimSpace(string(cur)) != "" {
		return nil // not a cpuset hierarchy, or already set
	}
	v, err := os.ReadFile(filepath.Clean(filepath.Join(parent, file)))
	if err != nil {
		return fmt.Errorf("read %s/%s: %w", parent, file, err)
	}
	if err := os.WriteFile(filepath.Clean(filepath.Join(dir, file)), v, 0o600); err != nil { //nolint:gosec // G703: a cgroup file below CgroupRoot
		return fmt.Errorf("write %s/%s: %w", dir, file, err)
	}
	return nil
}

// JoinCgroup moves pid into rel in every hierarchy, creating it as needed.
func JoinCgroup(rel string, pid int) error {
	if err := EnsureCgroup(rel); err != nil {
		return err
	}
	hs, err := Hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		p := filepath.Join(h, rel, "cgroup.procs")
		if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o600); err != nil {
			return fmt.Errorf("join cgroup %s: %w", p, err)
		}
	}
	return nil
}

// CgroupPIDs lists every process in rel or below, in any hierarchy.
func CgroupPIDs(rel string) []int {
	hs, _ := Hierarchies()
	seen := map[int]bool{}
	for _, h := range hs {
		root := filepath.Join(h, rel)
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Clean(filepath.Join(p, "cgroup.procs")))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// RemoveCgroup removes rel and everything below it from every hierarchy, retrying
// until deadline while the kernel still counts exiting tasks.
func RemoveCgroup(rel string, deadline time.Time) error {
	hs, err := Hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		root := filepath.Join(h, rel)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			for {
				err := os.Remove(d)
				if err == nil || errors.Is(err, fs.ErrNotExist) {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("remove cgroup %s: %w", d, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}

// CgroupExists reports the hierarchies in which rel exists.
func CgroupExists(rel string) []string {
	hs, _ := Hierarchies()
	var out []string
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, rel)); err == nil {
			out = append(out, filepath.Join(h, rel))
		}
	}
	return out
}

// MemoryUsage returns the memory cgroup's usage of rel in bytes (v1 memory.usage_in_bytes).
func MemoryUsage(rel string) (uint64, error) {
	p := filepath.Join(CgroupRoot, "memory", rel, "memory.usage_in_bytes")
	b, err := os.ReadFile(filepath.Clean(p))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", p, err)
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
