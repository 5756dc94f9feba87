package cniserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// The fields validateArgs names, and a value each accepts.
var validField = map[string]string{
	"args.container_id":  "c0",
	"args.ifname":        "eth0",
	"args.netns":         "/var/run/netns/cni-0",
	"args.pod.namespace": "default",
	"args.pod.name":      "web-0",
	"args.pod.uid":       "4b1e",
}

// argsOf builds a request from the fuzzed fields.
func argsOf(id, ifname, netns, ns, name, uid string, conf []byte) *cniv1.CmdArgs {
	return &cniv1.CmdArgs{ContainerId: id, Ifname: ifname, Netns: netns,
		Pod: &cniv1.PodRef{Namespace: ns, Name: name, Uid: uid}, NetworkConfig: conf}
}

// withField is a request valid but for field, which holds a's value.
func withField(a *cniv1.CmdArgs, field string) *cniv1.CmdArgs {
	v := validField
	out := argsOf(v["args.container_id"], v["args.ifname"], v["args.netns"], v["args.pod.namespace"], v["args.pod.name"], v["args.pod.uid"], nil)
	switch field {
	case "args.container_id":
		out.ContainerId = a.GetContainerId()
	case "args.ifname":
		out.Ifname = a.GetIfname()
	case "args.netns":
		out.Netns = a.GetNetns()
	case "args.pod.namespace":
		out.Pod.Namespace = a.GetPod().GetNamespace()
	case "args.pod.name":
		out.Pod.Name = a.GetPod().GetName()
	case "args.pod.uid":
		out.Pod.Uid = a.GetPod().GetUid()
	case "args.network_config":
		out.NetworkConfig = a.GetNetworkConfig()
	}
	return out
}

// refusedField is the field an InvalidArgument error names ("field: why").
func refusedField(t *testing.T, err error) string {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		t.Fatalf("refusal %v is not InvalidArgument", err)
	}
	field, why, ok := strings.Cut(st.Message(), ": ")
	if !ok || field == "" || why == "" {
		t.Fatalf("refusal %q does not name its field", st.Message())
	}
	return field
}

// Oracles of what an accepted field is, written apart from validate.go.
var containerIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func goodContainerID(id string) bool {
	return len(id) <= MaxContainerIDLen && containerIDPattern.MatchString(id)
}

func goodIfName(n string) bool {
	if n == "" || len(n) > 15 || n == "." || n == ".." {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c <= ' ' || c >= 0x7f || c == '/' || c == ':' {
			return false
		}
	}
	return true
}

// cleanText is valid UTF-8 without control characters.
func cleanText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f })
}

func goodNetns(p string, required bool) bool {
	if p == "" {
		return !required
	}
	return strings.HasPrefix(p, "/") && len(p) <= 4096 && cleanText(p)
}

func goodPodField(s string) bool { return len(s) <= 253 && cleanText(s) }

// FuzzValidateArgs: validateArgs never panics; a refusal is InvalidArgument
// naming one field, and that field alone, in an otherwise valid request, is
// refused the same way; an accepted request carries its fields unchanged,
// each as the CNI spec and the kernel allow, and survives what the server
// does with it: the gRPC encoding (validated again to the same attachment),
// the store key and the store's JSON record.
func FuzzValidateArgs(f *testing.F) {
	long := strings.Repeat
	for _, s := range []struct {
		id, ifname, netns, ns, name, uid, conf string
		required                               bool
	}{
		{"3f9c0a1b2c", "eth0", "/var/run/netns/cni-1234", "default", "web-0", "4b1e-8f2a", `{"cniVersion":"1.1.0","name":"estuary"}`, true},
		{"c", "net1", "", "", "", "", "", false},
		{long("a", MaxContainerIDLen), "eth0123456789ab", "/var/run/netns/" + long("n", 200), long("n", 253), long("p", 253), long("u", 253), "", true},
		{"", "eth0", "/ns", "", "", "", "", true},
		{"-a", "eth0", "/ns", "", "", "", "", true},
		{"a/b", "eth0", "/ns", "", "", "", "", true},
		{long("a", MaxContainerIDLen+1), "eth0", "/ns", "", "", "", "", true},
		{"c", "", "/ns", "", "", "", "", true},
		{"c", "eth0123456789abc", "/ns", "", "", "", "", true},
		{"c", "..", "/ns", "", "", "", "", true},
		{"c", "eth 0", "/ns", "", "", "", "", true},
		{"c", "eth:0", "/ns", "", "", "", "", true},
		{"c", "ethé", "/ns", "", "", "", "", true},
		{"c", "eth0", "", "", "", "", "", true},
		{"c", "eth0", "relative/ns", "", "", "", "", false},
		{"c", "eth0", "/ns\x00x", "", "", "", "", true},
		{"c", "eth0", "/ns\nx", "", "", "", "", true},
		{"c", "eth0", "/ns\xff", "", "", "", "", true},
		{"c", "eth0", "/ns", "a\tb", "", "", "", true},
		{"c", "eth0", "/ns", "", long("p", 254), "", "", true},
		{"c", "eth0", "/ns", "", "", "\xc3\x28", "", true},
	} {
		f.Add(s.id, s.ifname, s.netns, s.ns, s.name, s.uid, []byte(s.conf), s.required)
	}
	f.Fuzz(func(t *testing.T, id, ifname, netns, ns, name, uid string, conf []byte, required bool) {
		req := argsOf(id, ifname, netns, ns, name, uid, conf)
		a, err := validateArgs(req, required)
		if err != nil {
			field := refusedField(t, err)
			if _, known := validField[field]; !known && field != "args.network_config" {
				t.Fatalf("refusal names %q, not a field of the request: %v", field, err)
			}
			_, alone := validateArgs(withField(req, field), required)
			if alone == nil || refusedField(t, alone) != field {
				t.Fatalf("refused naming %s (%v), but that field alone is refused with %v", field, err, alone)
			}
			return
		}
		if a.ContainerID != id || a.IfName != ifname || a.Netns != netns || a.PodNamespace != ns || a.PodName != name ||
			a.PodUID != uid || !bytes.Equal(a.NetworkConfig, conf) {
			t.Fatalf("accepted request changed: %+v", a)
		}
		switch {
		case !goodContainerID(id):
			t.Fatalf("accepted container ID %q", id)
		case !goodIfName(ifname):
			t.Fatalf("accepted ifname %q", ifname)
		case !goodNetns(netns, required):
			t.Fatalf("accepted netns %q (required %t)", netns, required)
		case !goodPodField(ns) || !goodPodField(name) || !goodPodField(uid):
			t.Fatalf("accepted pod %q/%q uid %q", ns, name, uid)
		case len(conf) > 1<<20:
			t.Fatalf("accepted a network config of %d bytes", len(conf))
		}
		wire, err := proto.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request cannot be sent: %v", err)
		}
		var back cniv1.CmdArgs
		if err := proto.Unmarshal(wire, &back); err != nil {
			t.Fatalf("accepted request does not decode: %v", err)
		}
		if b, err := validateArgs(&back, required); err != nil || fmt.Sprint(b) != fmt.Sprint(a) {
			t.Fatalf("accepted request after the wire: %+v, %v; want %+v", b, err, a)
		}
		k := endpointstore.Key{ContainerID: a.ContainerID, IfName: a.IfName}
		if cid, ifn, _ := strings.Cut(k.String(), "/"); cid != id || ifn != ifname {
			t.Fatalf("store key %q splits into %q and %q", k, cid, ifn)
		}
		ep := endpointstore.Endpoint{Key: k, Netns: a.Netns, PodNamespace: a.PodNamespace, PodName: a.PodName, PodUID: a.PodUID}
		raw, err := json.Marshal(ep)
		if err != nil {
			t.Fatal(err)
		}
		var rec endpointstore.Endpoint
		if err := json.Unmarshal(raw, &rec); err != nil || rec.Key != ep.Key || rec.Netns != ep.Netns ||
			rec.PodNamespace != ep.PodNamespace || rec.PodName != ep.PodName || rec.PodUID != ep.PodUID {
			t.Fatalf("the store records %+v as %+v (%v)", ep, rec, err)
		}
	})
}

// FuzzValidateGC: validateGC never panics; a refusal is InvalidArgument
// naming network_config or the entry of valid_attachments at fault (that
// entry alone is refused the same way); an accepted request has no network
// configuration or a JSON object, and only attachments whose container ID
// and ifname the CNI spec and the kernel allow. attachments holds
// "containerID/ifname" entries separated by ';'.
func FuzzValidateGC(f *testing.F) {
	for _, s := range []struct{ conf, attachments string }{
		{`{"cniVersion":"1.1.0","name":"estuary","type":"estuary"}`, "3f9c0a/eth0;77ab/net1"},
		{"", ""},
		{"", "keep/eth0"},
		{"{name: estuary", ""},
		{"null", ""},
		{"[]", ""},
		{`"estuary"`, ""},
		{"{}", "ok/eth0;ok/"},
		{"{}", "-x/eth0"},
		{"{}", "ok/eth0/x"},
		{"{}", "ok/eth0123456789abc"},
	} {
		f.Add([]byte(s.conf), s.attachments)
	}
	f.Fuzz(func(t *testing.T, conf []byte, attachments string) {
		req := &cniv1.GCRequest{NetworkConfig: conf}
		if attachments != "" {
			for e := range strings.SplitSeq(attachments, ";") {
				id, ifname, _ := strings.Cut(e, "/")
				req.ValidAttachments = append(req.ValidAttachments, &cniv1.Attachment{ContainerId: id, Ifname: ifname})
			}
		}
		err := validateGC(req)
		if err != nil {
			field := refusedField(t, err)
			if field == "network_config" {
				if alone := validateGC(&cniv1.GCRequest{NetworkConfig: conf}); alone == nil || refusedField(t, alone) != field {
					t.Fatalf("refused naming %s (%v), but the configuration alone is refused with %v", field, err, alone)
				}
				return
			}
			i, which, ok := attachmentField(field)
			if !ok || i >= len(req.ValidAttachments) {
				t.Fatalf("refusal names %q, not a field of the request: %v", field, err)
			}
			a := req.ValidAttachments[i]
			if (which == "container_id") == goodContainerID(a.GetContainerId()) && (which == "ifname") == goodIfName(a.GetIfname()) {
				t.Fatalf("refused naming %s, but that entry's %s is good: %+v", field, which, a)
			}
			return
		}
		if len(conf) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(conf, &obj); err != nil || obj == nil {
				t.Fatalf("accepted network configuration %q is not a JSON object (%v)", conf, err)
			}
		}
		for i, a := range req.ValidAttachments {
			if !goodContainerID(a.GetContainerId()) || !goodIfName(a.GetIfname()) {
				t.Fatalf("accepted valid_attachments[%d] %+v", i, a)
			}
		}
		if _, err := proto.Marshal(req); err != nil {
			t.Fatalf("accepted request cannot be sent: %v", err)
		}
	})
}

// attachmentField reads "valid_attachments[i].field".
func attachmentField(field string) (int, string, bool) {
	rest, ok := strings.CutPrefix(field, "valid_attachments[")
	if !ok {
		return 0, "", false
	}
	idx, which, ok := strings.Cut(rest, "].")
	i, err := strconv.Atoi(idx)
	if !ok || err != nil || i < 0 || (which != "container_id" && which != "ifname") {
		return 0, "", false
	}
	return i, which, true
}
