package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/version"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

// testVersion is the version the binary under test is stamped with.
const testVersion = "1.2.3-e2e"

// e2e runs the real estuary-cni binary against a real server.
type e2e struct {
	bin     string
	socket  string
	srv     *cniserver.Server
	backend *cniservertest.Backend
}

type outcome struct {
	stdout, stderr string
	exit           int
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "estuary-cni")
	ldflags := "-ldflags=" + strings.Join(version.Stamp{Version: testVersion, GitCommit: "e2e"}.LDFlags(), " ")
	cmd := exec.Command("go", "build", ldflags, "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build estuary-cni: %v\n%s", err, out)
	}
	return bin
}

func (e *e2e) conf(extra string) string {
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":"estuary","type":"estuary","daemonSocket":%q,"timeoutSeconds":5%s}`, e.socket, extra)
}

// env builds the CNI environment for a per-container verb.
func env(command, id string) map[string]string {
	return map[string]string{
		"CNI_COMMAND":     command,
		"CNI_CONTAINERID": id,
		"CNI_NETNS":       "/var/run/netns/e2e-" + id,
		"CNI_IFNAME":      "eth0",
		"CNI_PATH":        "/opt/cni/bin",
		"CNI_ARGS":        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-" + id + ";K8S_POD_UID=uid-" + id,
	}
}

func (e *e2e) run(t *testing.T, vars map[string]string, stdin string) outcome {
	t.Helper()
	cmd := exec.Command(e.bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		o.exit = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run estuary-cni: %v", err)
	}
	return o
}

func (o outcome) ok(t *testing.T) outcome {
	t.Helper()
	if o.exit != 0 {
		t.Fatalf("exit %d, stdout %s, stderr %s", o.exit, o.stdout, o.stderr)
	}
	return o
}

// fails asserts a non-zero exit with a CNI error of code whose message or
// details contain substr.
func (o outcome) fails(t *testing.T, code uint, substr string) {
	t.Helper()
	if o.exit == 0 {
		t.Fatalf("exit 0, want failure; stdout %s", o.stdout)
	}
	var e types.Error
	if err := json.Unmarshal([]byte(o.stdout), &e); err != nil {
		t.Fatalf("stdout %q is not a CNI error: %v", o.stdout, err)
	}
	if e.Code != code || !strings.Contains(e.Msg+" "+e.Details, substr) {
		t.Fatalf("error = code %d %q %q, want code %d containing %q", e.Code, e.Msg, e.Details, code, substr)
	}
}

func (e *e2e) records(t *testing.T) []endpointstore.Endpoint {
	t.Helper()
	list, err := e.srv.Store().List()
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestEndToEnd(t *testing.T) {
	e := &e2e{bin: buildBinary(t), backend: cniservertest.NewBackend()}
	var state string
	e.socket, state = cniservertest.Paths(t)
	e.srv = cniservertest.Start(t, e.backend, e.socket, state)

	t.Run("version", e.testVersion)
	t.Run("add check del", e.testAddCheckDel)
	t.Run("del unknown", e.testDelUnknown)
	t.Run("gc", e.testGC)
	t.Run("status", e.testStatus)
	t.Run("bad input", e.testBadInput)
	t.Run("daemon down", e.testDaemonDown)
}

func (e *e2e) testVersion(t *testing.T) {
	o := e.run(t, map[string]string{"CNI_COMMAND": "VERSION"}, `{"cniVersion":"1.1.0"}`).ok(t)
	var v struct {
		SupportedVersions []string `json:"supportedVersions"`
		EstuaryVersion    string   `json:"estuaryVersion"`
		GitCommit         string   `json:"gitCommit"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &v); err != nil {
		t.Fatalf("VERSION output %q: %v", o.stdout, err)
	}
	if strings.Join(v.SupportedVersions, ",") != "1.0.0,1.1.0" {
		t.Fatalf("supportedVersions = %v, want 1.0.0 and 1.1.0", v.SupportedVersions)
	}
	if v.EstuaryVersion != testVersion || v.GitCommit != "e2e" {
		t.Errorf("VERSION output %q: want estuaryVersion %s, gitCommit e2e", o.stdout, testVersion)
	}
	// The libcni decoder runtimes use reads the answer.
	if info, err := new(cniversion.PluginDecoder).Decode([]byte(o.stdout)); err != nil || len(info.SupportedVersions()) != 2 {
		t.Errorf("libcni decodes VERSION output %q as %v, %v", o.stdout, info, err)
	}
	cmd := exec.Command(e.bin, "--version")
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "CNI plugin estuary-cni "+testVersion+" (commit e2e,") {
		t.Errorf("estuary-cni --version: %q, %v", out, err)
	}
}

func (e *e2e) testAddCheckDel(t *testing.T) {
	o := e.run(t, env("ADD", "c1"), e.conf("")).ok(t)
	res, err := types100.NewResult([]byte(o.stdout))
	if err != nil {
		t.Fatalf("ADD output %q is not a 1.1.0 result: %v", o.stdout, err)
	}
	r := res.(*types100.Result)
	if r.CNIVersion != "1.1.0" || len(r.IPs) != 1 || r.IPs[0].Interface == nil || *r.IPs[0].Interface != 1 ||
		r.Interfaces[1].Sandbox != "/var/run/netns/e2e-c1" || len(r.Routes) != 1 {
		t.Fatalf("ADD result = %s", o.stdout)
	}
	key := endpointstore.Key{ContainerID: "c1", IfName: "eth0"}
	ep, err := e.srv.Store().Get(key)
	if err != nil || ep.PodName != "pod-c1" || ep.PodUID != "uid-c1" || ep.IPs[0] != r.IPs[0].Address.String() {
		t.Fatalf("record after ADD = %+v, %v", ep, err)
	}

	withPrev := e.conf(`,"prevResult":` + strings.TrimSpace(o.stdout))
	e.run(t, env("CHECK", "c1"), withPrev).ok(t)
	ep.IPs = []string{"10.244.99.99/32"}
	if err := e.srv.Store().Put(ep); err != nil {
		t.Fatal(err)
	}
	e.run(t, env("CHECK", "c1"), withPrev).fails(t, types.ErrInternal, "recorded [10.244.99.99/32]")

	del := env("DEL", "c1")
	delete(del, "CNI_NETNS")
	for range 2 {
		e.run(t, del, e.conf("")).ok(t)
	}
	if _, err := e.srv.Store().Get(key); !errors.Is(err, endpointstore.ErrNotFound) {
		t.Fatalf("record after DEL: %v", err)
	}
	e.run(t, env("CHECK", "c1"), withPrev).fails(t, types.ErrUnknownContainer, "c1/eth0")
}

func (e *e2e) testDelUnknown(t *testing.T) {
	e.run(t, env("DEL", "never-added"), e.conf("")).ok(t)
}

func (e *e2e) testGC(t *testing.T) {
	for _, id := range []string{"gc-a", "gc-b", "gc-c"} {
		e.run(t, env("ADD", id), e.conf("")).ok(t)
	}
	valid := `,"cni.dev/valid-attachments":[{"containerID":"gc-a","ifname":"eth0"}]`
	e.run(t, map[string]string{"CNI_COMMAND": "GC", "CNI_PATH": "/opt/cni/bin"}, e.conf(valid)).ok(t)
	list := e.records(t)
	if len(list) != 1 || list[0].ContainerID != "gc-a" {
		t.Fatalf("records after GC = %+v, want only gc-a", list)
	}
	if e.backend.Attached("gc-b", "eth0") {
		t.Fatal("GC left gc-b attached in the backend")
	}
	e.run(t, env("DEL", "gc-a"), e.conf("")).ok(t)
}

func (e *e2e) testStatus(t *testing.T) {
	status := map[string]string{"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}
	e.run(t, status, e.conf("")).ok(t)
	e.backend.SetNotReady(errors.New("waiting for the node's VTEP"))
	defer e.backend.SetNotReady(nil)
	e.run(t, status, e.conf("")).fails(t, types.ErrPluginNotAvailable, "waiting for the node's VTEP")
}

func (e *e2e) testBadInput(t *testing.T) {
	missing := func(name string) map[string]string {
		vars := env("ADD", "bad")
		delete(vars, name)
		return vars
	}
	e.run(t, env("ADD", "bad"), `{"cniVersion":"1.1.0","name":`).fails(t, types.ErrDecodingFailure, "")
	e.run(t, env("ADD", "bad"), `{"cniVersion":"1.1.0","name":"estuary","daemonSocket":"relative.sock"}`).fails(t, types.ErrInvalidNetworkConfig, "daemonSocket")
	e.run(t, missing("CNI_COMMAND"), e.conf("")).fails(t, types.ErrInvalidEnvironmentVariables, "CNI_COMMAND")
	e.run(t, missing("CNI_CONTAINERID"), e.conf("")).fails(t, types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID")
	e.run(t, missing("CNI_NETNS"), e.conf("")).fails(t, types.ErrInvalidEnvironmentVariables, "CNI_NETNS")
	relative := env("ADD", "bad")
	relative["CNI_NETNS"] = "netns/bad"
	e.run(t, relative, e.conf("")).fails(t, types.ErrInvalidEnvironmentVariables, "args.netns")
	args := env("ADD", "bad")
	args["CNI_ARGS"] = "K8S_POD_NAME"
	e.run(t, args, e.conf("")).fails(t, types.ErrInvalidEnvironmentVariables, "CNI_ARGS")
	e.run(t, env("CHECK", "bad"), e.conf("")).fails(t, types.ErrInvalidNetworkConfig, "prevResult")
	if list := e.records(t); len(list) != 0 {
		t.Fatalf("bad input wrote records: %+v", list)
	}
}

func (e *e2e) testDaemonDown(t *testing.T) {
	down := &e2e{bin: e.bin, socket: filepath.Join(t.TempDir(), "absent.sock")}
	status := map[string]string{"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}
	down.run(t, status, down.conf("")).fails(t, types.ErrTryAgainLater, down.socket)
	down.run(t, env("ADD", "c9"), down.conf("")).fails(t, types.ErrTryAgainLater, down.socket)
}
