package endpointstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, path
}

func sample(id, ifname string) Endpoint {
	return Endpoint{
		Key:          Key{ContainerID: id, IfName: ifname},
		Netns:        "/var/run/netns/" + id,
		PodNamespace: "default",
		PodName:      "web-" + id,
		PodUID:       "uid-" + id,
		IPs:          []string{"10.0.0.5/32"},
		Result:       []byte{1, 2, 3},
		Created:      time.Unix(1700000000, 0).UTC(),
	}
}

func TestPutGetDeleteList(t *testing.T) {
	s, _ := openTemp(t)
	defer func() { _ = s.Close() }()

	a, b := sample("aaa", "eth0"), sample("bbb", "eth0")
	for _, ep := range []Endpoint{b, a} {
		if err := s.Put(ep); err != nil {
			t.Fatalf("Put %s: %v", ep.Key, err)
		}
	}
	got, err := s.Get(a.Key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Netns != a.Netns || got.PodUID != a.PodUID || len(got.IPs) != 1 || string(got.Result) != string(a.Result) {
		t.Fatalf("Get = %+v, want %+v", got, a)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 || list[0].ContainerID != "aaa" || list[1].ContainerID != "bbb" {
		t.Fatalf("List = %+v, %v; want aaa, bbb", list, err)
	}
	if err := s.Delete(a.Key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(a.Key); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := s.Get(a.Key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
}

func TestPutReplaces(t *testing.T) {
	s, _ := openTemp(t)
	defer func() { _ = s.Close() }()
	ep := sample("aaa", "eth0")
	if err := s.Put(ep); err != nil {
		t.Fatal(err)
	}
	ep.IPs = []string{"10.0.0.9/32"}
	if err := s.Put(ep); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ep.Key)
	if err != nil || got.IPs[0] != "10.0.0.9/32" {
		t.Fatalf("Get = %+v, %v; want replaced IPs", got, err)
	}
}

func TestRejectsBadKeys(t *testing.T) {
	s, _ := openTemp(t)
	defer func() { _ = s.Close() }()
	for _, k := range []Key{{}, {ContainerID: "a"}, {IfName: "eth0"}, {ContainerID: "a/b", IfName: "eth0"}} {
		if err := s.Put(Endpoint{Key: k}); err == nil {
			t.Errorf("Put(%q) succeeded, want error", k)
		}
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("bad Put wrote records: %+v", list)
	}
}

func TestReopenKeepsEndpoints(t *testing.T) {
	s, path := openTemp(t)
	if err := s.Put(sample("aaa", "eth0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode = %v, %v; want 0600", info.Mode(), err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer func() { _ = s2.Close() }()
	got, err := s2.Get(Key{ContainerID: "aaa", IfName: "eth0"})
	if err != nil || got.PodName != "web-aaa" {
		t.Fatalf("after reopen Get = %+v, %v", got, err)
	}
}

func TestSecondOpenFailsWhileHeld(t *testing.T) {
	s, path := openTemp(t)
	defer func() { _ = s.Close() }()
	if s2, err := Open(path); err == nil {
		_ = s2.Close()
		t.Fatal("second Open of a held state file succeeded")
	}
	// A file held by another process is not damaged: it stays in place.
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) > 0 {
		t.Errorf("a held state file was moved aside: %v", aside)
	}
}

// A state file that cannot be read is moved aside, not a reason to stop:
// the store starts empty (Fresh) and works.
func TestUnreadableFileIsQuarantined(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string){
		"garbage": func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("this is not a bbolt file, not at all, not even close....."), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"truncated": func(t *testing.T, path string) {
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				if err := s.Put(sample(fmt.Sprintf("c%02d", i), "eth0")); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.Close()
			if err := os.Truncate(path, 4096*2+100); err != nil {
				t.Fatal(err)
			}
		},
		"undecodable record": func(t *testing.T, path string) {
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			err = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketName).Put([]byte("x/eth0"), []byte("{not json")) })
			_ = s.Close()
			if err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			damage(t, path)
			before, _ := os.ReadFile(path)
			s, err := Open(path)
			if err != nil {
				t.Fatalf("Open of a damaged file: %v", err)
			}
			defer func() { _ = s.Close() }()
			if !s.Fresh() || s.Quarantined() == "" {
				t.Fatalf("Fresh %t, Quarantined %q; want a quarantined, fresh store", s.Fresh(), s.Quarantined())
			}
			if kept, err := os.ReadFile(s.Quarantined()); err != nil || string(kept) != string(before) {
				t.Errorf("the damaged file was not kept as it was at %s (%v)", s.Quarantined(), err)
			}
			if eps, err := s.List(); err != nil || len(eps) != 0 {
				t.Errorf("fresh store lists %d endpoints, %v", len(eps), err)
			}
			if err := s.Put(sample("new", "eth0")); err != nil {
				t.Errorf("Put on the new file: %v", err)
			}
		})
	}
}

func TestFreshOnlyWithoutEarlierRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Fresh() || s.Quarantined() != "" {
		t.Errorf("new file: Fresh %t, Quarantined %q", s.Fresh(), s.Quarantined())
	}
	_ = s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if s.Fresh() {
		t.Error("reopened file reported fresh")
	}
}
