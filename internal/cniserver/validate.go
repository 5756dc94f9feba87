package cniserver

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
)

// MaxContainerIDLen is the longest container ID the server accepts: the
// host veth's alias records the attachment's key ("estuary <container
// ID>/<ifname>", with a pinned MAC), and the kernel holds at most 255 bytes
// of alias (package podnet).
const MaxContainerIDLen = 128

const (
	// maxIfNameLen is IFNAMSIZ minus the terminating NUL.
	maxIfNameLen    = 15
	maxPathLen      = 4096
	maxPodFieldLen  = 253
	maxNetConfBytes = 1 << 20
	maxAttachments  = 100000
)

// invalid returns an InvalidArgument status naming the field.
func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// validateArgs checks the attachment fields; netnsRequired is false for Del.
func validateArgs(a *cniv1.CmdArgs, netnsRequired bool) (Attachment, error) {
	if a == nil {
		return Attachment{}, invalid("args", "missing")
	}
	if err := validateContainerID("args.container_id", a.GetContainerId()); err != nil {
		return Attachment{}, err
	}
	if err := validateIfName("args.ifname", a.GetIfname()); err != nil {
		return Attachment{}, err
	}
	if err := validateNetns(a.GetNetns(), netnsRequired); err != nil {
		return Attachment{}, err
	}
	if err := validatePod(a.GetPod()); err != nil {
		return Attachment{}, err
	}
	if len(a.GetNetworkConfig()) > maxNetConfBytes {
		return Attachment{}, invalid("args.network_config", "%d bytes exceeds the %d byte limit", len(a.GetNetworkConfig()), maxNetConfBytes)
	}
	return Attachment{
		ContainerID:   a.GetContainerId(),
		IfName:        a.GetIfname(),
		Netns:         a.GetNetns(),
		PodNamespace:  a.GetPod().GetNamespace(),
		PodName:       a.GetPod().GetName(),
		PodUID:        a.GetPod().GetUid(),
		NetworkConfig: a.GetNetworkConfig(),
	}, nil
}

// validateContainerID follows the CNI spec: alphanumerics plus '_', '.' and
// '-', starting with an alphanumeric.
func validateContainerID(field, id string) error {
	if id == "" {
		return invalid(field, "empty")
	}
	if len(id) > MaxContainerIDLen {
		return invalid(field, "longer than %d bytes", MaxContainerIDLen)
	}
	for i, r := range id {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if alnum || i > 0 && (r == '_' || r == '.' || r == '-') {
			continue
		}
		return invalid(field, "%q: invalid character %q at %d", id, r, i)
	}
	return nil
}

// validateIfName applies the kernel's rules for interface names.
func validateIfName(field, name string) error {
	if name == "" {
		return invalid(field, "empty")
	}
	if len(name) > maxIfNameLen {
		return invalid(field, "%q is longer than %d bytes", name, maxIfNameLen)
	}
	if name == "." || name == ".." {
		return invalid(field, "%q is not a valid interface name", name)
	}
	for _, r := range name {
		if r == '/' || r == ':' || r <= ' ' || r == 0x7f || r > 0x7e {
			return invalid(field, "%q contains invalid character %q", name, r)
		}
	}
	return nil
}

func validateNetns(netns string, required bool) error {
	if netns == "" {
		if required {
			return invalid("args.netns", "empty")
		}
		return nil
	}
	if len(netns) > maxPathLen {
		return invalid("args.netns", "longer than %d bytes", maxPathLen)
	}
	if !filepath.IsAbs(netns) {
		return invalid("args.netns", "%q is not an absolute path", netns)
	}
	if strings.ContainsRune(netns, 0) {
		return invalid("args.netns", "contains a NUL byte")
	}
	return validText("args.netns", netns)
}

// validText refuses what a request's text field cannot carry: bytes that
// are not UTF-8 (protobuf strings, the store's JSON records) and control
// characters.
func validText(field, v string) error {
	if !utf8.ValidString(v) {
		return invalid(field, "%q is not UTF-8", v)
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return invalid(field, "contains control characters")
	}
	return nil
}

func validatePod(p *cniv1.PodRef) error {
	fields := []struct{ name, value string }{
		{"args.pod.namespace", p.GetNamespace()},
		{"args.pod.name", p.GetName()},
		{"args.pod.uid", p.GetUid()},
	}
	for _, f := range fields {
		if len(f.value) > maxPodFieldLen {
			return invalid(f.name, "longer than %d bytes", maxPodFieldLen)
		}
		if err := validText(f.name, f.value); err != nil {
			return err
		}
	}
	return nil
}

func validateGC(req *cniv1.GCRequest) error {
	if len(req.GetNetworkConfig()) > maxNetConfBytes {
		return invalid("network_config", "%d bytes exceeds the %d byte limit", len(req.GetNetworkConfig()), maxNetConfBytes)
	}
	if conf := req.GetNetworkConfig(); len(conf) > 0 {
		var c map[string]any
		if err := json.Unmarshal(conf, &c); err != nil {
			return invalid("network_config", "not a JSON network configuration: %v", err)
		}
		if c == nil {
			return invalid("network_config", "null, not a JSON network configuration")
		}
	}
	if len(req.GetValidAttachments()) > maxAttachments {
		return invalid("valid_attachments", "more than %d entries", maxAttachments)
	}
	for i, a := range req.GetValidAttachments() {
		if err := validateContainerID(fmt.Sprintf("valid_attachments[%d].container_id", i), a.GetContainerId()); err != nil {
			return err
		}
		if err := validateIfName(fmt.Sprintf("valid_attachments[%d].ifname", i), a.GetIfname()); err != nil {
			return err
		}
	}
	return nil
}
