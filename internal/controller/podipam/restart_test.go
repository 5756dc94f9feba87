package podipam

import (
	"fmt"
	"sync"
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestRestartReleasesWhatWentAwayAndNeverDuplicates: pods deleted while the
// manager was down lose their addresses once it is back, and a fresh
// allocator rebuilt from the records never hands out an address twice.
func TestRestartReleasesWhatWentAwayAndNeverDuplicates(t *testing.T) {
	overlay(t, "ov-restart", "10.60.0.0/24")
	ns := newNamespace(t, nil)
	stop := startManager(t)
	var first []string
	for i := range 20 {
		first = append(first, newPod(t, ns, fmt.Sprintf("a%d", i)).Name)
	}
	for _, name := range first {
		waitInstances(t, ns, name, 1, estuaryv1.IPInstanceBound)
	}
	stop()

	for _, name := range first[:5] {
		p := podRef(ns, name)
		deletePod(t, p)
	}
	startManager(t)
	for _, name := range first[:5] {
		waitInstances(t, ns, name, 0, "")
	}
	for i := range 20 {
		newPod(t, ns, fmt.Sprintf("b%d", i))
	}
	eventually(t, "35 addresses", func() error {
		if n := len(allInstances(t, ns)); n != 35 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	requireUnique(t, allInstances(t, ns))
	waitUsed(t, "ov-restart-0", 35)
}

// TestRestartDuringCreations stops the manager while 50 pods are being
// created and starts a new one: every pod ends with exactly one address and
// no address is given twice.
func TestRestartDuringCreations(t *testing.T) {
	overlay(t, "ov-midway", "10.61.0.0/24")
	ns := newNamespace(t, nil)
	stop := startManager(t)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			newPod(t, ns, fmt.Sprintf("m%d", i))
		}()
	}
	eventually(t, "some pods served", func() error {
		if n := len(allInstances(t, ns)); n < 10 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	stop()
	wg.Wait()
	startManager(t)
	eventually(t, "all 50 pods served", func() error {
		for i := range 50 {
			if n := len(instancesOf(t, ns, fmt.Sprintf("m%d", i))); n != 1 {
				return fmt.Errorf("m%d has %d addresses", i, n)
			}
		}
		return nil
	})
	requireUnique(t, allInstances(t, ns))
	waitUsed(t, "ov-midway-0", 50)
}
