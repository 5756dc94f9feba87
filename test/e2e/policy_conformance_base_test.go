//go:build lab

package e2e_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"sigs.k8s.io/network-policy-api/conformance"
)

// cnpBaseManifests is where network-policy-api's suite keeps the
// namespaces and StatefulSets every test runs against.
const cnpBaseManifests = "base/manifests.yaml"

// sctpServerEnv marks the containers of the base manifests that serve SCTP
// (agnhost porter with SERVE_SCTP_PORT_<port>).
const sctpServerEnv = "SERVE_SCTP_PORT_"

// serveCNPBase returns the location of the suite's own base manifests
// without their SCTP servers, for suite Options.BaseManifests. Every pod
// of the base carries two agnhost porter containers serving SCTP, for the
// SCTP tests alone (cnpSkips); on a kernel without SCTP they exit at once
// ("Failed to listen SCTP"), the pods never become Ready and the suite's
// Setup fails before any test. The rest of the file is served as the suite
// embeds it, and each test's own manifests are read from the suite as they
// are. The suite reads a base location from its embedded files or over
// https only, so the manifests are served by a TLS server of this test,
// which http.DefaultClient (the suite's fetcher) trusts until the test ends.
func serveCNPBase(t *testing.T) (string, error) {
	t.Helper()
	if err := noSCTP(); err != nil {
		return "", fmt.Errorf("the base manifests keep their SCTP servers only where SCTP works: %w", err)
	}
	b, err := conformance.Manifests.ReadFile(cnpBaseManifests)
	if err != nil {
		return "", fmt.Errorf("network-policy-api's %s: %w", cnpBaseManifests, err)
	}
	base, removed, err := dropSCTPServers(string(b))
	if err != nil {
		return "", fmt.Errorf("network-policy-api's %s: %w", cnpBaseManifests, err)
	}
	t.Logf("base manifests: network-policy-api's %s less its %d SCTP server containers (%s)", cnpBaseManifests, removed, sctpUnsupported)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+cnpBaseManifests {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write([]byte(base))
	}))
	prev := http.DefaultClient
	http.DefaultClient = srv.Client()
	t.Cleanup(func() {
		http.DefaultClient = prev
		srv.Close()
	})
	return srv.URL + "/" + cnpBaseManifests, nil
}

// dropSCTPServers removes from manifest (YAML that may hold the suite's
// template actions, so it is edited as text) each item of a containers:
// list that names sctpServerEnv, and returns the rest and how many it
// removed. It fails unless it removed two from each StatefulSet and no
// SCTP is left, so that a change upstream is noticed rather than guessed at.
func dropSCTPServers(manifest string) (string, int, error) {
	lines := strings.Split(manifest, "\n")
	out := make([]string, 0, len(lines))
	removed, containers := 0, -1 // containers: indentation of the open containers: key
	for i := 0; i < len(lines); {
		l := lines[i]
		trimmed, ind := strings.TrimSpace(l), indentOf(l)
		if containers >= 0 && trimmed != "" && ind <= containers && !strings.HasPrefix(trimmed, "- ") {
			containers = -1
		}
		switch {
		case trimmed == "containers:":
			containers = ind
		case containers >= 0 && strings.HasPrefix(trimmed, "- "):
			j := i + 1
			for j < len(lines) && (strings.TrimSpace(lines[j]) == "" || indentOf(lines[j]) > ind) {
				j++
			}
			item := lines[i:j]
			if strings.Contains(strings.Join(item, "\n"), sctpServerEnv) {
				removed++
			} else {
				out = append(out, item...)
			}
			i = j
			continue
		}
		out = append(out, l)
		i++
	}
	rest := strings.Join(out, "\n")
	sets := strings.Count(manifest, "\nkind: StatefulSet")
	if sets == 0 || removed != 2*sets || strings.Contains(strings.ToUpper(rest), "SCTP") {
		return "", removed, fmt.Errorf("expected two SCTP server containers in each of its %d StatefulSets and none left; removed %d", sets, removed)
	}
	return rest, removed, nil
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

// TestDropSCTPServersKeepsTheRest: the base the conformance run applies is
// network-policy-api's, less the SCTP server containers and nothing else.
func TestDropSCTPServersKeepsTheRest(t *testing.T) {
	b, err := conformance.Manifests.ReadFile(cnpBaseManifests)
	if err != nil {
		t.Fatal(err)
	}
	rest, removed, err := dropSCTPServers(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{"serve-hostname --tcp --http=false --port 80", "serve-hostname --udp --http=false --port 53",
		"hostNetwork: true", "name: centaur\n", "conformance-house: forbidden-forrest"} {
		if strings.Count(rest, keep) != strings.Count(string(b), keep) {
			t.Errorf("the base lost %q", keep)
		}
	}
	if got, want := strings.Count(rest, "image: "), strings.Count(string(b), "image: ")-removed; got != want {
		t.Errorf("the base has %d containers, want %d (%d removed)", got, want, removed)
	}
}
