package plugin

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

func wantCNIError(t *testing.T, err error, code uint, substr string) {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *types.Error", err, err)
	}
	if e.Code != code || !strings.Contains(e.Msg+" "+e.Details, substr) {
		t.Fatalf("error = code %d %q %q, want code %d containing %q", e.Code, e.Msg, e.Details, code, substr)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"estuary","type":"estuary"}`))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if conf.DaemonSocket != DefaultDaemonSocket || conf.Timeout() != DefaultTimeout {
		t.Fatalf("defaults = %q, %v", conf.DaemonSocket, conf.Timeout())
	}
}

func TestParseConfigFields(t *testing.T) {
	conf, err := ParseConfig([]byte(`{"cniVersion":"1.1.0","name":"estuary","type":"estuary",
		"daemonSocket":"/tmp/x.sock","timeoutSeconds":5,
		"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.2/32"}]}}`))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if conf.DaemonSocket != "/tmp/x.sock" || conf.Timeout() != 5*time.Second || conf.PrevResult == nil {
		t.Fatalf("conf = %+v", conf)
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name, in string
		code     uint
		substr   string
	}{
		{"empty", ``, types.ErrDecodingFailure, "empty network configuration"},
		{"malformed", `{"cniVersion":`, types.ErrDecodingFailure, "decode network configuration"},
		{"wrong type", `{"cniVersion":"1.1.0","name":"e","timeoutSeconds":"x"}`, types.ErrDecodingFailure, "timeoutSeconds"},
		{"no version", `{"name":"e"}`, types.ErrInvalidNetworkConfig, "cniVersion"},
		{"no name", `{"cniVersion":"1.1.0"}`, types.ErrInvalidNetworkConfig, "name"},
		{"relative socket", `{"cniVersion":"1.1.0","name":"e","daemonSocket":"run/x.sock"}`, types.ErrInvalidNetworkConfig, "daemonSocket"},
		{"long socket", `{"cniVersion":"1.1.0","name":"e","daemonSocket":"/` + strings.Repeat("a", 200) + `"}`, types.ErrInvalidNetworkConfig, "daemonSocket"},
		{"negative timeout", `{"cniVersion":"1.1.0","name":"e","timeoutSeconds":-1}`, types.ErrInvalidNetworkConfig, "timeoutSeconds"},
		{"huge timeout", `{"cniVersion":"1.1.0","name":"e","timeoutSeconds":100000}`, types.ErrInvalidNetworkConfig, "timeoutSeconds"},
		{"bad prevResult", `{"cniVersion":"1.1.0","name":"e","prevResult":{"ips":[{"address":"nope"}]}}`, types.ErrDecodingFailure, "prevResult"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.in))
			wantCNIError(t, err, tc.code, tc.substr)
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"estuary","type":"estuary"}`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"e","daemonSocket":"/run/estuary/cni.sock","timeoutSeconds":3}`))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"e","prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"eth0"}],"ips":[{"interface":0,"address":"10.0.0.2/32","gateway":"169.254.1.1"}],"routes":[{"dst":"0.0.0.0/0"}]}}`))
	f.Add([]byte(`{"cniVersion":"0.4.0","name":"e","prevResult":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/24"}]}}`))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"e","cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}]}`))
	f.Add([]byte(`{"cniVersion":"9.9.9","name":"e","prevResult":{}}`))
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"e","prevResult":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		conf, err := ParseConfig(data)
		if err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code == 0 || e.Msg == "" {
				t.Fatalf("error %v (%T) is not a coded CNI error", err, err)
			}
			return
		}
		if !filepath.IsAbs(conf.DaemonSocket) || conf.Timeout() <= 0 || conf.CNIVersion == "" || conf.Name == "" {
			t.Fatalf("accepted an invalid configuration: %+v", conf)
		}
		if conf.RawPrevResult != nil && conf.PrevResult != nil {
			if _, err := FromResult(conf.PrevResult); err != nil {
				t.Logf("prevResult does not convert: %v", err)
			}
		}
	})
}

func TestParseArgs(t *testing.T) {
	p, err := ParseArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=1234;")
	if err != nil {
		t.Fatalf("ParseArgs: %v", err)
	}
	if p != (PodArgs{Namespace: "default", Name: "web-0", UID: "1234"}) {
		t.Fatalf("ParseArgs = %+v", p)
	}
	if p, err := ParseArgs(""); err != nil || p != (PodArgs{}) {
		t.Fatalf("ParseArgs(empty) = %+v, %v", p, err)
	}
	for _, bad := range []string{"K8S_POD_NAME", "=x", "a=b;junk"} {
		_, err := ParseArgs(bad)
		wantCNIError(t, err, types.ErrInvalidEnvironmentVariables, "CNI_ARGS")
	}
}

// A CNI variable that is not UTF-8 cannot travel in the request to the
// daemon: it is refused as an invalid environment, naming the variable,
// before the daemon is dialled.
func TestPrepareRefusesNonUTF8(t *testing.T) {
	conf := []byte(`{"cniVersion":"1.1.0","name":"estuary","daemonSocket":"/nonexistent/cni.sock"}`)
	for name, args := range map[string]*skel.CmdArgs{
		"CNI_CONTAINERID": {ContainerID: "c\xff", IfName: "eth0", Netns: "/var/run/netns/x", StdinData: conf},
		"CNI_IFNAME":      {ContainerID: "c", IfName: "eth\xc3", Netns: "/var/run/netns/x", StdinData: conf},
		"CNI_NETNS":       {ContainerID: "c", IfName: "eth0", Netns: "/var/run/netns/\x80", StdinData: conf},
		"CNI_ARGS":        {ContainerID: "c", IfName: "eth0", Netns: "/var/run/netns/x", Args: "K8S_POD_UID=\xfe", StdinData: conf},
	} {
		err := (&Plugin{Stdout: io.Discard}).Add(args)
		wantCNIError(t, err, types.ErrInvalidEnvironmentVariables, name)
	}
}
