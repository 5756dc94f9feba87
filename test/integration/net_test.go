//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// cniCall is one execution of the plugin binary as a runtime makes it.
type cniCall struct {
	bin, binDir string
	stdin       []byte
	command     string
	containerID string
	netns       string
	podNS       string
	podName     string
	podUID      string
}

type outcome struct {
	stdout, stderr string
	exit           int
	took           time.Duration
}

func (c cniCall) run(t *testing.T) outcome {
	t.Helper()
	cmd := exec.Command(c.bin) // #nosec G204 -- test
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"CNI_COMMAND=" + c.command,
		"CNI_CONTAINERID=" + c.containerID,
		"CNI_NETNS=" + c.netns,
		"CNI_IFNAME=eth0",
		"CNI_PATH=" + c.binDir,
		fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", c.podNS, c.podName, c.podUID),
	}
	cmd.Stdin = bytes.NewReader(c.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		o.exit = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run %s %s: %v", c.bin, c.command, err)
	}
	return o
}

func (o outcome) ok(t *testing.T, what string) outcome {
	t.Helper()
	if o.exit != 0 {
		t.Fatalf("%s: exit %d, stdout %s, stderr %s", what, o.exit, o.stdout, o.stderr)
	}
	return o
}

// cniError parses a failed call's CNI error.
func (o outcome) cniError(t *testing.T) types.Error {
	t.Helper()
	if o.exit == 0 {
		t.Fatalf("exit 0, want failure; stdout %s", o.stdout)
	}
	var e types.Error
	if err := json.Unmarshal([]byte(o.stdout), &e); err != nil {
		t.Fatalf("stdout %q is not a CNI error: %v", o.stdout, err)
	}
	return e
}

// contains fails unless out holds substr.
func contains(t *testing.T, what, out, substr string) {
	t.Helper()
	if !strings.Contains(out, substr) {
		t.Errorf("%s: want %q in\n%s", what, substr, out)
	}
}
