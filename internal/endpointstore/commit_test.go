package endpointstore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	berrors "go.etcd.io/bbolt/errors"
)

// Concurrent writes all land, each durable once its call returns (read back
// by a fresh Open), and one write's failure fails only that write.
func TestConcurrentWrites(t *testing.T) {
	s, path := openTemp(t)
	const n = 64
	if err := s.Put(sample("gone", "eth0")); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, n+2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Put(sample(fmt.Sprintf("c%02d", i), "eth0")) })
	}
	wg.Go(func() { errs[n] = s.Delete(Key{ContainerID: "gone", IfName: "eth0"}) })
	// bbolt refuses keys over 32 KiB before writing anything.
	wg.Go(func() { errs[n+1] = s.Put(sample(strings.Repeat("x", 40000), "eth0")) })
	wg.Wait()
	for i, err := range errs[:n+1] {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if !errors.Is(errs[n+1], berrors.ErrKeyTooLarge) {
		t.Errorf("oversized key: %v, want ErrKeyTooLarge", errs[n+1])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s2.Close() }()
	list, err := s2.List()
	if err != nil || len(list) != n {
		t.Fatalf("List = %d endpoints, %v; want %d", len(list), err, n)
	}
	for i, ep := range list {
		if want := fmt.Sprintf("c%02d", i); ep.ContainerID != want {
			t.Errorf("endpoint %d is %s, want %s", i, ep.ContainerID, want)
		}
	}
}

func TestWriteAfterCloseFails(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(sample("aaa", "eth0")); err == nil {
		t.Fatal("Put on a closed store succeeded")
	}
}
