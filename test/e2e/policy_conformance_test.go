//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	confv1a1 "sigs.k8s.io/network-policy-api/conformance/apis/v1alpha1"
	"sigs.k8s.io/network-policy-api/conformance/tests"
	"sigs.k8s.io/network-policy-api/conformance/utils/suite"
	"sigs.k8s.io/yaml"
)

// cnpTestsEnv selects the network-policy-api conformance tests
// TestClusterNetworkPolicyConformance runs: "all" (make conformance-cnp),
// a comma-separated list of ShortNames, or unset for cnpSubset (make test).
const cnpTestsEnv = "ESTUARY_CNP_TESTS"

// cnpReportEnv names the file the conformance report is written to;
// unset: _output/conformance-cnp/report.yaml in the checkout.
const cnpReportEnv = "ESTUARY_CNP_REPORT"

// cnpSubset are the network-policy-api conformance tests make test runs:
// the admin tier's priority field (a Deny at priority 50 over a Pass at 60,
// then the Pass moved to 40 by an update, so the baseline tier's Accept
// decides) and the tiers' integration (admin Deny, then Pass handing
// traffic to a NetworkPolicy and to the baseline tier). Both probe TCP
// between the suite's base pods, which the full run shares.
var cnpSubset = []string{"CNPAdminTierPriorityField", "CNPAdminTierIntegration"}

// sctpUnsupported is why the SCTP tests do not run here.
const sctpUnsupported = "the kernel has no SCTP sockets (CONFIG_IP_SCTP unset: socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) " +
	"fails with EPROTONOSUPPORT), so agnhost can neither serve nor connect over SCTP; the lab's nodes share this kernel"

// sctpProbed is why tests of several protocols do not run here.
const sctpProbed = "its cases probe SCTP ports besides TCP and UDP ones (agnhost connect --protocol=sctp), and " + sctpUnsupported

// cnpSkips are the conformance tests the run leaves out (suite
// Options.SkipTests), each with its reason, and the check that the reason
// holds on this machine. The upstream report lists them as skipped.
var cnpSkips = []struct {
	test, reason string
	holds        func() error
}{
	{"CNPAdminTierEgressSCTP", sctpUnsupported, noSCTP},
	{"CNPAdminTierIngressSCTP", sctpUnsupported, noSCTP},
	{"CNPBaselineTierEgressSCTP", sctpUnsupported, noSCTP},
	{"CNPBaselineTierIngressSCTP", sctpUnsupported, noSCTP},
	// These test TCP and UDP too, but each of their cases also probes an
	// SCTP port of the same pods and requires it to connect or to be
	// dropped, which a kernel without SCTP can do neither of.
	{"CNPAdminTierGress", sctpProbed, noSCTP},
	{"CNPBaselineTierGress", sctpProbed, noSCTP},
	{"CNPAdminTierEgressInlineCIDRPeers", sctpProbed, noSCTP},
	{"CNPBaselineTierEgressInlineCIDRPeers", sctpProbed, noSCTP},
	{"CNPAdminTierPortRange", sctpProbed, noSCTP},
	{"CNPBaselineTierPortRange", sctpProbed, noSCTP},
}

// noSCTP returns nil when this kernel refuses SCTP sockets as a kernel
// without SCTP does, and an error when it opens one (or fails otherwise).
func noSCTP() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_SCTP)
	switch {
	case err == nil:
		_ = syscall.Close(fd)
		return errors.New("this kernel opens SCTP sockets: the SCTP tests must run")
	case errors.Is(err, syscall.EPROTONOSUPPORT), errors.Is(err, syscall.ESOCKTNOSUPPORT):
		return nil
	}
	return fmt.Errorf("socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP): %w (neither EPROTONOSUPPORT nor ESOCKTNOSUPPORT)", err)
}

// TestClusterNetworkPolicyConformance runs sigs.k8s.io/network-policy-api's
// own conformance suite (the version go.mod requires), profile
// ClusterNetworkPolicy with its standard features, against the lab: the
// suite applies its namespaces and pods, then each test's
// ClusterNetworkPolicies, and probes the pods with agnhost connect. It
// writes the suite's conformance report (cnpReportEnv) and fails when any
// test fails. cnpTestsEnv chooses the tests; cnpSkips are left out.
func TestClusterNetworkPolicyConformance(t *testing.T) {
	e := needLab(t)
	skips := make([]string, 0, len(cnpSkips))
	for _, s := range cnpSkips {
		if err := s.holds(); err != nil {
			t.Fatalf("%s is skipped because %s; but: %v", s.test, s.reason, err)
		}
		skips = append(skips, s.test)
		t.Logf("skipped: %s: %s", s.test, s.reason)
	}
	selected, err := selectCNPTests(os.Getenv(cnpTestsEnv), skips)
	if err != nil {
		t.Fatal(err)
	}
	base, err := serveCNPBase(t)
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", e.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, cnpv1beta1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	version := "dev"
	if e.estuary != nil && e.estuary.ChartVersion != "" {
		version = e.estuary.ChartVersion
	}
	cSuite, err := suite.NewConformanceProfileTestSuite(suite.ConformanceProfileOptions{
		Options: suite.Options{
			Client:               c,
			ClientSet:            cs,
			KubeConfig:           *cfg,
			BaseManifests:        base,
			CleanupBaseResources: true,
			SupportedFeatures:    sets.New(suite.CNPConformanceProfile.StandardFeatures.UnsortedList()...),
			SkipTests:            skips,
		},
		Implementation: confv1a1.Implementation{
			Organization:          "estuary-cni",
			Project:               "estuary",
			URL:                   "https://github.com/estuary-cni/estuary",
			Version:               version,
			Contact:               []string{"https://github.com/estuary-cni/estuary/issues"},
			AdditionalInformation: "test/e2e TestClusterNetworkPolicyConformance on estuary-lab (make conformance-cnp; docs/conformance.md)",
		},
		ConformanceProfiles: sets.New(suite.CNPConformanceProfileName),
	})
	if err != nil {
		t.Fatalf("network-policy-api conformance suite: %v", err)
	}
	// Registered before the suite's own clean-up, so it runs after it: the
	// suite deletes its namespaces without waiting, and the tests after
	// this one count the cluster's addresses.
	t.Cleanup(func() { waitCNPNamespacesGone(t, cs) })
	cSuite.Setup(t)
	if err := cSuite.Run(t, selected); err != nil {
		t.Fatal(err)
	}
	report, err := cSuite.Report()
	if err != nil {
		t.Fatalf("conformance report: %v", err)
	}
	if err := writeCNPReport(t, e, report); err != nil {
		t.Fatal(err)
	}
}

// selectCNPTests returns the suite's tests spec names ("" for cnpSubset,
// "all", or ShortNames separated by commas), in the suite's order. A name
// the suite does not have, or one of skips asked for by name, is an error.
func selectCNPTests(spec string, skips []string) ([]suite.ConformanceTest, error) {
	known := map[string]bool{}
	for _, ct := range tests.ConformanceTests {
		known[ct.ShortName] = true
	}
	for _, s := range append(append([]string{}, skips...), cnpSubset...) {
		if !known[s] {
			return nil, fmt.Errorf("network-policy-api's suite has no test %s (renamed upstream?)", s)
		}
	}
	if spec == "all" {
		return tests.ConformanceTests, nil
	}
	want := cnpSubset
	if spec != "" {
		want = strings.Split(spec, ",")
	}
	wanted := map[string]bool{}
	for _, w := range want {
		w = strings.TrimSpace(w)
		switch {
		case !known[w]:
			return nil, fmt.Errorf("%s=%s: network-policy-api's suite has no test %q", cnpTestsEnv, spec, w)
		case sets.New(skips...).Has(w):
			return nil, fmt.Errorf("%s=%s: %s is skipped on this machine (cnpSkips)", cnpTestsEnv, spec, w)
		}
		wanted[w] = true
	}
	var out []suite.ConformanceTest
	for _, ct := range tests.ConformanceTests {
		if wanted[ct.ShortName] {
			out = append(out, ct)
		}
	}
	return out, nil
}

// writeCNPReport writes the suite's report as YAML and logs its counts.
func writeCNPReport(t *testing.T, e *labEnv, report *confv1a1.ConformanceReport) error {
	t.Helper()
	path := os.Getenv(cnpReportEnv)
	if path == "" {
		path = filepath.Join(e.repo, "_output", "conformance-cnp", "report.yaml")
	}
	b, err := yaml.Marshal(report)
	if err != nil {
		return fmt.Errorf("conformance report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("conformance report: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("conformance report: %w", err)
	}
	for _, p := range report.ProfileReports {
		s := p.Standard
		failed := append([]string{}, s.FailedTests...)
		sort.Strings(failed)
		t.Logf("profile %s (network-policy-api %s), standard: %s, %d passed, %d failed, %d skipped; failed: %v",
			p.Name, report.NetworkPolicyBundleVersion, s.Result, s.Passed, s.Failed, s.Skipped, failed)
	}
	t.Logf("conformance report: %s", path)
	return nil
}

// cnpNamespacePrefix names the namespaces of the suite's base.
const cnpNamespacePrefix = "network-policy-conformance-"

// waitCNPNamespacesGone waits, at most 5 minutes, until no namespace of the
// suite's base is left (their pods gone, their addresses released).
func waitCNPNamespacesGone(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var left []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		left = left[:0]
		for _, ns := range nss.Items {
			if strings.HasPrefix(ns.Name, cnpNamespacePrefix) {
				left = append(left, ns.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("the suite's namespaces are not gone after 5 minutes: %v", left)
	}
}
