package nsrun_test

import (
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

func TestDoRunsInTheNamespaceAndLeavesTheCallerAlone(t *testing.T) {
	path := nstest.New(t)
	want, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = want.Close() }()
	before, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = before.Close() }()

	var inside bool
	if err := nsrun.Do(path, func() error {
		cur, err := netns.Get()
		if err != nil {
			return err
		}
		defer func() { _ = cur.Close() }()
		inside = cur.Equal(want)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !inside {
		t.Error("fn did not run in the target namespace")
	}
	after, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = after.Close() }()
	if !after.Equal(before) {
		t.Error("the caller's thread changed namespace")
	}
}

func TestDoNamesAMissingNamespace(t *testing.T) {
	err := nsrun.Do("/nonexistent/netns", func() error { return nil })
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/netns") {
		t.Fatalf("got %v; want an error naming the path", err)
	}
}

func TestDoWithoutPathRunsHere(t *testing.T) {
	ran := false
	if err := nsrun.Do("", func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("ran=%v err=%v", ran, err)
	}
}
