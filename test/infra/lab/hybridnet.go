package lab

// hybridnet in the lab (`up --cni hybridnet`): the system estuary replaces,
// run as its users run it, so that it can be measured beside estuary and
// migrated from.
//
// Its source (HybridnetSrcEnv, by default ../shared/peers/hybridnet beside
// the checkout) is copied into the cache, the lab's patches applied
// (hack/hybridnet: one, for sysctls a network namespace does not have, each
// patch saying why), and built there with its own go.mod
// (its four binaries: cni, daemon, manager, webhook); the webhook's serving
// certificate is made by its own dist/secrets script, signed by the CA its
// chart's webhook configurations trust; the image is laid out as its
// Dockerfile lays it out (images.Hybridnet). It is then installed with its
// own chart and CRDs (charts/hybridnet), policy off (felix is a separate
// build, not made here), its "init" overlay network on the lab's pod range,
// and an untagged VLAN underlay network on the lab's switch (the same
// addresses estuary's untagged underlay uses) for the nodes labelled
// HybridnetUnderlayLabel.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/test/infra/lab/images"
)

// HybridnetSrcEnv names hybridnet's source tree.
const HybridnetSrcEnv = "HYBRIDNET_SRC"

// The objects the lab gives hybridnet.
const (
	HybridnetRelease       = "hybridnet"
	HybridnetUnderlay      = "underlay-vlan0" // the untagged VLAN Network and its Subnet
	HybridnetUnderlayLabel = "network"        // node label its nodeSelector matches, value HybridnetUnderlay
	hybridnetImageRepo     = "estuary-lab.local/hybridnet"
	hybridnetMasterLabel   = "node-role.kubernetes.io/master"
)

// HybridnetState records the hybridnet of a lab.
type HybridnetState struct {
	Src    string `json:"src"`    // the source tree built
	Hash   string `json:"hash"`   // its content hash, naming the build and the image
	Chart  string `json:"chart"`  // its chart, in the build's copy
	Image  string `json:"image"`  // the image every hybridnet pod runs
	Values string `json:"values"` // the values it was installed with
	Helm   string `json:"helm"`
}

// hybridnetSrc is the hybridnet source tree: $HYBRIDNET_SRC, else
// ../shared/peers/hybridnet beside the checkout.
func hybridnetSrc(repo string) string {
	if s := os.Getenv(HybridnetSrcEnv); s != "" {
		return s
	}
	return filepath.Join(repo, "..", "shared", "peers", "hybridnet")
}

// prepareHybridnet builds hybridnet's binaries, certificate and image
// (returning the image's archive) and installs helm.
func (l *Lab) prepareHybridnet(repo string) (*HybridnetState, string, error) {
	src := hybridnetSrc(repo)
	hash, err := treeHash(src)
	if err != nil {
		return nil, "", fmt.Errorf("hybridnet source %s (set %s): %w", src, HybridnetSrcEnv, err)
	}
	patches, err := filepath.Glob(filepath.Join(repo, "hack", "hybridnet", "*.patch"))
	if err != nil {
		return nil, "", err
	}
	if ph, err := filesHash(patches); err != nil {
		return nil, "", fmt.Errorf("the lab's hybridnet patches: %w", err)
	} else if len(patches) > 0 {
		hash = hash[:6] + ph[:6]
	}
	dir := filepath.Join(l.opts.CacheDir, "hybridnet", hash)
	work := filepath.Join(dir, "src")
	if _, err := os.Stat(filepath.Join(dir, "bin", "webhook")); err != nil {
		l.step("building hybridnet %s from %s (a few minutes the first time)", hash, src)
		if err := l.buildHybridnet(src, work, filepath.Join(dir, "bin"), patches); err != nil {
			return nil, "", err
		}
	}
	certs := filepath.Join(work, "dist", "secrets")
	if _, err := os.Stat(filepath.Join(certs, "tls.key")); err != nil {
		cmd := exec.Command("bash", "generate-tls-certificates.sh")
		cmd.Dir = certs
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("hybridnet webhook certificate: %w\n%s", err, out)
		}
	}
	tag := hybridnetImageRepo + ":" + hash
	archive, err := images.Hybridnet(filepath.Join(l.opts.CacheDir, "lab", "images"), tag, CNIPluginDir,
		images.HybridnetSources{Src: work, Bin: filepath.Join(dir, "bin"), Certs: certs})
	if err != nil {
		return nil, "", err
	}
	helm, err := l.runScript(filepath.Join(repo, "hack", "helm.sh"))
	if err != nil {
		return nil, "", err
	}
	return &HybridnetState{Src: src, Hash: hash, Chart: filepath.Join(work, "charts", "hybridnet"), Image: tag,
		Values: filepath.Join(l.paths.Root, "hybridnet-values.yaml"), Helm: helm}, archive, nil
}

// buildHybridnet copies src to work (the source may be read-only), applies
// the lab's patches (hack/hybridnet, each saying why) and builds its commands
// into bin with its own go.mod, as its Dockerfile does.
func (l *Lab) buildHybridnet(src, work, bin string, patches []string) error {
	_ = os.RemoveAll(work)
	// CopyFS makes every file writable (0666 plus the source's execute bits).
	if err := os.CopyFS(work, os.DirFS(src)); err != nil {
		return fmt.Errorf("copy hybridnet source: %w", err)
	}
	for _, p := range patches {
		cmd := exec.Command("git", "apply", p) //nolint:gosec // G204: the checkout's own patches
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apply %s to hybridnet: %w\n%s", p, err, out)
		}
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-w -s", "-o", bin+"/", "./cmd/...") //nolint:gosec // G204: builds the source the lab was pointed at
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(&stderr, prefixWriter{l.p})
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build hybridnet: %w\n%s", err, lastLines(stderr.String(), 15))
	}
	return nil
}

// treeHash is a short content hash of every file under dir.
func treeHash(dir string) (string, error) {
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	}); err != nil {
		return "", err
	}
	sort.Strings(files)
	return filesHash(files)
}

// filesHash is a short content hash of files, names relative to nothing.
func filesHash(files []string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Clean(f))
		if err != nil {
			return "", err
		}
		_, _ = fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		_, _ = h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// HybridnetValues are the chart values the lab installs hybridnet with.
func HybridnetValues(plan *Plan, image string) ([]byte, error) {
	repo, tag, _ := strings.Cut(image, ":")
	registry, name, _ := strings.Cut(repo, "/")
	v := map[string]any{
		"images": map[string]any{"registryURL": registry,
			"hybridnet": map[string]any{"image": name, "tag": tag, "imagePullPolicy": "IfNotPresent"}},
		"init":    map[string]any{"cidr": plan.Pods.String(), "ipVersion": "4", "vxlanID": 4},
		"manager": map[string]any{"replicas": 1},
		"webhook": map[string]any{"replicas": 1},
		"daemon": map[string]any{"enableFelixPolicy": false, "preferVxlanInterfaces": "eth0",
			"preferVlanInterfaces": "eth0"},
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode hybridnet values: %w", err)
	}
	return b, nil
}

// hybridnetUnderlay is the untagged VLAN Network and Subnet on the switch.
func hybridnetUnderlay(plan *Plan) string {
	u := plan.Underlay
	return fmt.Sprintf(`apiVersion: networking.alibaba.com/v1
kind: Network
metadata:
  name: %[1]s
spec:
  netID: 0
  type: Underlay
  mode: VLAN
  nodeSelector:
    %[2]s: %[1]s
---
apiVersion: networking.alibaba.com/v1
kind: Subnet
metadata:
  name: %[1]s
spec:
  network: %[1]s
  netID: 0
  range:
    version: "4"
    cidr: %[3]s
    gateway: %[4]s
    start: %[5]s
`, HybridnetUnderlay, HybridnetUnderlayLabel, u, u.Addr().Next(), nth(u.Addr(), 10))
}

// installHybridnet installs hybridnet's chart once the nodes registered,
// labels every node into the underlay network and creates it.
func (l *Lab) installHybridnet(ctx context.Context, st *State) error {
	h := st.Hybridnet
	l.step("waiting for %d nodes to register", len(l.plan.Nodes))
	if _, err := l.waitNodes(ctx, st.BinDir, false); err != nil {
		return err
	}
	values, err := HybridnetValues(l.plan, h.Image)
	if err != nil {
		return err
	}
	if err := os.WriteFile(h.Values, values, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", h.Values, err)
	}
	// hybridnet's manager and webhook run on master nodes (their chart's
	// nodeSelector): node-1 is the lab's.
	if _, err := l.kubectl(ctx, st.BinDir, "label", "node", l.plan.Nodes[0].Name, "--overwrite", hybridnetMasterLabel+"="); err != nil {
		return err
	}
	l.step("installing hybridnet: helm install %s %s -n kube-system -f %s", HybridnetRelease, h.Chart, h.Values)
	cmd := exec.CommandContext(ctx, h.Helm, "install", HybridnetRelease, h.Chart, "--namespace", "kube-system", //nolint:gosec // G204: runs programs the lab located itself
		"--values", h.Values, "--kubeconfig", l.paths.Kubeconfig(), "--wait", "--timeout", "5m")
	cmd.Env = append(os.Environ(), l.helmEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm install hybridnet: %w\n%s", err, lastLines(string(out), 20))
	}
	for _, w := range []string{"daemonset/hybridnet-daemon", "deployment/hybridnet-manager", "deployment/hybridnet-webhook"} {
		if err := l.rolloutStatus(ctx, st.BinDir, w); err != nil {
			return err
		}
	}
	for _, n := range l.plan.Nodes {
		if _, err := l.kubectl(ctx, st.BinDir, "label", "node", n.Name, "--overwrite", HybridnetUnderlayLabel+"="+HybridnetUnderlay); err != nil {
			return err
		}
	}
	p := filepath.Join(l.paths.Root, "hybridnet-underlay.yaml")
	if err := os.WriteFile(p, []byte(hybridnetUnderlay(l.plan)), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	l.step("hybridnet underlay: Network and Subnet %s (%s, untagged) on every node", HybridnetUnderlay, l.plan.Underlay)
	// The webhook validates Networks and Subnets; its Service has endpoints
	// a moment after its pod is Ready.
	for {
		_, err := l.kubectl(ctx, st.BinDir, "apply", "-f", p)
		if err == nil || !strings.Contains(err.Error(), "no endpoints available") {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
