// Package testenv owns starting envtest's kube-apiserver (and etcd) with
// estuary's CRDs for tests: the KUBEBUILDER_ASSETS check, the CRD
// directories resolved from the module root, the client's scheme and
// stopping what was started, also when starting fails. It is for tests only.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// ErrNoAssets is returned by Start when KUBEBUILDER_ASSETS is not set.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: run `make test-unit`, or point it at the " +
	"directory printed by `hack/kube-binaries.sh kube-apiserver kubectl etcd`")

// CRDDir is the directory of estuary's CRDs, relative to the module root.
const CRDDir = "config/crd"

// Options adjust Start.
type Options struct {
	// CRDDirs are the directories of the CRDs to install, relative to the
	// module root; empty means CRDDir. A missing directory fails Start.
	CRDDirs []string
	// AddToScheme adds types to the client's scheme beyond client-go's
	// core types and estuary's API.
	AddToScheme []func(*runtime.Scheme) error
	// Strict makes the client ask for strict field validation: a field the
	// schema does not know fails the write instead of being pruned.
	Strict bool
	// Webhooks, when set, are installed by envtest; Start fills in the
	// local serving host, port and certificate directory a webhook server
	// must use.
	Webhooks *envtest.WebhookInstallOptions
	// EtcdURL, when set, is filled in with etcd's client URL, for a test
	// that must store what the API server would refuse (an object written
	// before its validation tightened).
	EtcdURL *string
}

// Start runs etcd and kube-apiserver with the CRDs installed and returns
// their config, a client over a scheme with client-go's core types,
// estuary's API and opts.AddToScheme, and stop, which ends them. When Start
// fails, whatever it started is already stopped.
func Start(opts Options) (cfg *rest.Config, c client.Client, stop func() error, err error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, nil, ErrNoAssets
	}
	scheme := runtime.NewScheme()
	adds := append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, estuaryv1.AddToScheme}, opts.AddToScheme...)
	for _, add := range adds {
		if err := add(scheme); err != nil {
			return nil, nil, nil, fmt.Errorf("scheme: %w", err)
		}
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, nil, nil, err
	}
	dirs := opts.CRDDirs
	if len(dirs) == 0 {
		dirs = []string{CRDDir}
	}
	env := &envtest.Environment{ErrorIfCRDPathMissing: true}
	for _, d := range dirs {
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, filepath.Join(root, filepath.FromSlash(d)))
	}
	if opts.Webhooks != nil {
		env.WebhookInstallOptions = *opts.Webhooks
	}
	if cfg, err = env.Start(); err != nil {
		// Start may fail after launching etcd and kube-apiserver (e.g. when
		// a CRD is refused); stop them so nothing outlives the test.
		_ = env.Stop()
		return nil, nil, nil, fmt.Errorf("start envtest: %w", err)
	}
	if opts.Webhooks != nil {
		*opts.Webhooks = env.WebhookInstallOptions
	}
	if opts.EtcdURL != nil && env.ControlPlane.Etcd != nil && env.ControlPlane.Etcd.URL != nil {
		*opts.EtcdURL = env.ControlPlane.Etcd.URL.String()
	}
	if c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = env.Stop()
		return nil, nil, nil, fmt.Errorf("client: %w", err)
	}
	if opts.Strict {
		c = client.WithFieldValidation(c, metav1.FieldValidationStrict)
	}
	return cfg, c, env.Stop, nil
}

// Main is the body of a suite's TestMain: it starts the API server as
// Start does, calls setup with its config and client, runs the tests, calls
// the teardown setup returned (if any) and stops the API server. It returns
// the exit code for os.Exit: 1, with the error on stderr, when starting or
// setup fails.
func Main(m *testing.M, opts Options, setup func(cfg *rest.Config, c client.Client) (teardown func(), err error)) int {
	cfg, c, stop, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
		}
	}()
	teardown, err := setup(cfg, c)
	if teardown != nil {
		defer teardown()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// ModuleRoot is the nearest directory at or above the working directory
// that holds a go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// Eventually calls check every 50ms until it returns nil, and fails tb
// with what and check's last error once d has passed.
func Eventually(tb testing.TB, what string, d time.Duration, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
