package nstest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// childEnv makes this test binary, run by one of the tests below, play a
// test that fails in the way its value names, after creating a namespace.
const childEnv = "ESTUARY_NSTEST_CHILD"

// TestFailingChild is the failing test the tests below run in a child
// process (a failed test fails its parents, so it cannot run in this one).
// Its subtest creates a namespace, prints the namespace's path and fails;
// the test then prints whether the namespace was gone when t.Run returned,
// that is after the subtest's cleanups ran.
func TestFailingChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("plays a failing test only in a child of TestNewRemovesTheNamespaceWhenTheTestFails")
	}
	var path string
	t.Run("fails", func(t *testing.T) {
		path = New(t)
		fmt.Println("namespace", path)
		switch mode {
		case "Fail":
			t.Fail()
		case "FailNow":
			t.FailNow()
		case "Fatal during setup":
			IP(t, path, "link", "set", "no-such-link", "up")
		case "panic":
			panic("on purpose")
		case "killed":
			_, _ = io.Copy(io.Discard, os.Stdin) // until the parent kills this process
		}
	})
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Println("gone when t.Run returned")
	} else {
		fmt.Println("still there when t.Run returned")
	}
}

// child starts this test binary as TestFailingChild in mode; the returned
// reader is its standard output.
func child(ctx context.Context, t *testing.T, mode string) (*exec.Cmd, *bufio.Reader, io.WriteCloser) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestFailingChild$", "-test.count", "1") // #nosec G204 -- this test binary
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stderr = new(bytes.Buffer) // a panicking child's trace; shown when a check fails
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the child test: %v", err)
	}
	return cmd, bufio.NewReader(out), in
}

// readNamespace reads the child's output up to the line naming its namespace.
func readNamespace(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "namespace "); ok {
			return p
		}
		if err != nil {
			t.Fatalf("the child test named no namespace: %v", err)
		}
	}
}

func requireGone(t *testing.T, path string) {
	t.Helper()
	if !strings.HasPrefix(filepath.Base(path), Prefix) {
		t.Fatalf("namespace %q is not one New makes", path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace %s of the failed test is still there (%v)", path, err)
		_ = remove(filepath.Base(path))
	}
}

func TestNewRemovesTheNamespaceWhenTheTestFails(t *testing.T) {
	RequireRoot(t)
	for _, mode := range []string{"Fail", "FailNow", "Fatal during setup", "panic"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd, out, in := child(ctx, t, mode)
			defer func() { _ = in.Close() }()
			path := readNamespace(t, out)
			b, _ := io.ReadAll(out)
			err := cmd.Wait()
			rest := string(b) + cmd.Stderr.(*bytes.Buffer).String()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the child test did not fail: %v\n%s", err, rest)
			}
			if !strings.Contains(rest, "--- FAIL: TestFailingChild/fails") {
				t.Errorf("the child's subtest is not reported failed:\n%s", rest)
			}
			if mode != "panic" && !strings.Contains(rest, "gone when t.Run returned") {
				t.Errorf("namespace %s was there when t.Run returned:\n%s", path, rest)
			}
			requireGone(t, path)
		})
	}
}

// TestSweepRemovesTheNamespacesOfAKilledRun: a test process killed before
// its cleanups (as -timeout does) leaves its namespace, and the next sweep
// removes it; the namespaces of this running process stay.
func TestSweepRemovesTheNamespacesOfAKilledRun(t *testing.T) {
	RequireRoot(t)
	mine := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, out, in := child(ctx, t, "killed")
	defer func() { _ = in.Close() }()
	path := readNamespace(t, out)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("namespace %s of the killed run: %v; want it left behind", path, err)
	}
	if errs := SweepOrphans(); len(errs) > 0 {
		t.Errorf("sweep: %v", errs)
	}
	requireGone(t, path)
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("the sweep removed namespace %s of this running test: %v", mine, err)
	}
}
