# estuary — build, generate, lint and test.
#
# Tools are installed with `go install` at pinned versions into ./bin (git
# ignores it); Kubernetes and etcd binaries for envtest and the lab are built
# from the Go module proxy into a cache outside the repository by
# hack/kube-binaries.sh. Nothing is downloaded from anywhere else.

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := build

BIN := $(CURDIR)/bin
CONTROLLER_GEN_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM_VERSION ?= v3.22.0
# Where `make images` writes the image archives.
IMAGES_DIR ?= $(CURDIR)/_output/images

GO_TEST_FLAGS ?= -count=1
# Packages that need root and the lab cluster run separately (see test-lab).
UNIT_PKGS = $$(go list ./... | grep -v /test/lab)

# The version stamped into every binary (internal/version; hack/version.sh):
# the checkout's vX.Y.Z tag (git describe), else 0.0.0-dev, with HEAD and its
# commit date. `make release VERSION=X.Y.Z` releases X.Y.Z.
VERSION_INFO := $(shell bash hack/version.sh)
VERSION ?= $(word 1,$(VERSION_INFO))
GIT_COMMIT ?= $(word 2,$(VERSION_INFO))
BUILD_DATE ?= $(word 3,$(VERSION_INFO))
VERSION_PKG := github.com/estuary-cni/estuary/internal/version
VERSION_LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).GitCommit=$(GIT_COMMIT) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

# estuary-cni runs once per CNI call, so its start-up counts: without symbol
# tables and without gRPC's request tracing it is half the size. The lab's
# images build it the same way (test/infra/lab/images/estuary.go).
CNI_BUILD_FLAGS := -trimpath -tags grpcnotrace -ldflags="-s -w $(VERSION_LDFLAGS)"

.PHONY: build
build: ## Build every binary into ./bin.
	@mkdir -p $(BIN)
	@for d in cmd/*/; do [ -f "$$d/main.go" ] || continue; \
		n=$$(basename $$d); [ "$$n" != estuary-cni ] || continue; \
		echo "go build -ldflags '$(VERSION_LDFLAGS)' -o bin/$$n ./cmd/$$n"; \
		CGO_ENABLED=0 go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/$$n ./cmd/$$n || exit 1; done
	@echo 'go build $(CNI_BUILD_FLAGS) -o bin/estuary-cni ./cmd/estuary-cni'
	@CGO_ENABLED=0 go build $(CNI_BUILD_FLAGS) -o $(BIN)/estuary-cni ./cmd/estuary-cni
	@printf '#!/bin/sh\nexec kubectl-estuary __complete "$$@"\n' > $(BIN)/kubectl_complete-estuary && chmod 755 $(BIN)/kubectl_complete-estuary

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $@

.PHONY: helm
helm: ## Install helm $(HELM_VERSION) into ./bin (bin/helm links to it).
	@HELM_VERSION=$(HELM_VERSION) BIN=$(BIN) bash hack/helm.sh >/dev/null

.PHONY: generate-deps
generate-deps: ## Install the Debian packages make generate needs (protoc, clang-14, libbpf headers).
	@bash hack/debian-deps.sh protobuf-compiler clang-14 llvm-14 libbpf-dev

.PHONY: generate
generate: generate-deps $(CONTROLLER_GEN) ## Generate deepcopy code and CRDs from api/, the ClusterNetworkPolicy CRD of network-policy-api (and its v1alpha1 CRDs for tests), the CNI gRPC code and the fast path's BPF object.
	$(CONTROLLER_GEN) object paths=./api/v1/...
	$(CONTROLLER_GEN) crd paths=./api/v1/... output:crd:artifacts:config=config/crd
	CONTROLLER_GEN=$(CONTROLLER_GEN) bash hack/gen-policy-crds.sh
	cp config/crd/*.yaml charts/estuary/crds/
	bash hack/gen-proto.sh
	go generate ./internal/dataplane/fastpath

.PHONY: verify-generate
verify-generate: generate ## Fail if generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- api config/crd charts/estuary/crds internal/dataplane/fastpath)" ]; then \
		echo "generated files are out of date; run 'make generate' and commit:"; \
		git status --porcelain -- api config/crd charts/estuary/crds internal/dataplane/fastpath; git --no-pager diff --stat -- api config/crd charts/estuary/crds internal/dataplane/fastpath; exit 1; fi
	@echo "generated files are up to date"

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint with .golangci.yml, fail on an untidy go.mod, and cross-build kubectl-estuary for macOS.
	@go mod tidy -diff >/dev/null || { echo "go.mod or go.sum is not tidy; run 'go mod tidy' and commit:"; go mod tidy -diff; exit 1; }
	$(GOLANGCI_LINT) run ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o /dev/null ./cmd/kubectl-estuary

.PHONY: kube-binaries
kube-binaries: ## Build kube-apiserver, kubectl and etcd for envtest (cached outside the repo).
	bash hack/kube-binaries.sh kube-apiserver kubectl etcd

.PHONY: test
test: lab-deps test-unit test-integration test-lab ## Install what the tests need, then unit, fuzz-seed, envtest, node-path and lab tests.

.PHONY: test-unit
test-unit: helm ## Unit and fuzz-seed tests, and the envtest suites against a real kube-apiserver.
	@assets=$$(bash hack/kube-binaries.sh kube-apiserver kubectl etcd | tail -n 1) && \
	echo "KUBEBUILDER_ASSETS=$$assets" && \
	KUBEBUILDER_ASSETS=$$assets go test $(GO_TEST_FLAGS) $(UNIT_PKGS)

.PHONY: test-integration
test-integration: ## The node path (manager, daemon, real CNI binary) on a real API server and kernel (root).
	@assets=$$(bash hack/kube-binaries.sh kube-apiserver kubectl etcd | tail -n 1) && \
	KUBEBUILDER_ASSETS=$$assets go test $(GO_TEST_FLAGS) -tags integration -v ./test/integration/...

# Waves of the chaos suite (TestChaosNeverDuplicatesOrLeaks): test-lab runs
# one wave per fault, make chaos the full size.
CHAOS_SUBSET_WAVES ?= 5
CHAOS_WAVES ?= 20

# The dual-stack phase of test-lab: the tests that need a dual-stack lab
# (TestDualStack..., which skip on the IPv4 lab), on a fresh one.
DUALSTACK_TESTS ?= ^TestDualStack

.PHONY: test-lab
test-lab: ## End-to-end tests on the lab cluster (IPv4, then a dual-stack lab), the chaos suite at CHAOS_SUBSET_WAVES waves, with a subset of the upstream conformance tests and of network-policy-api's ClusterNetworkPolicy suite (root).
	bash hack/kube-binaries.sh e2e.test kubectl >/dev/null
	@if [ -d test/lab ]; then ESTUARY_CHAOS_WAVES=$(CHAOS_SUBSET_WAVES) go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 75m -v ./test/lab/... ./test/e2e/... ; \
	else echo "no lab tests"; fi
	$(MAKE) test-dualstack
	$(MAKE) test-kubeadm

.PHONY: test-ipv6
test-ipv6: lab-deps ## The IPv6-only e2e tests (TestIPv6Only...) and the upstream conformance subset on a fresh IPv6-only lab (estuary-lab up --ip-family ipv6) (root).
	bash hack/kube-binaries.sh e2e.test kubectl >/dev/null
	ESTUARY_E2E_IP_FAMILY=ipv6 go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 30m -v -run '^(TestIPv6Only|TestUpstreamConformanceSubset$$)' ./test/e2e/

# The tests make test-kubeadm runs on a cluster kubeadm made: the install
# guide's own steps, the smoke tests and the upstream conformance subset.
KUBEADM_TESTS ?= TestKubeadmClusterFromTheInstallGuide|$(KUBE_SMOKE_TESTS)|TestUpstreamConformanceSubset

.PHONY: test-kubeadm
test-kubeadm: lab-deps ## On a fresh lab made by kubeadm (estuary-lab up --bootstrap kubeadm: kubeadm init and join, estuary installed with docs/install.md's own commands), the kubeadm, smoke and conformance-subset e2e tests (KUBEADM_TESTS) (root).
	bash hack/kube-binaries.sh e2e.test kubectl >/dev/null
	ESTUARY_E2E_BOOTSTRAP=kubeadm go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 40m -v -run '^($(KUBEADM_TESTS))$$' ./test/e2e/

.PHONY: test-hybridnet
test-hybridnet: lab-deps ## hybridnet itself on a fresh lab (estuary-lab up --cni hybridnet: built from HYBRIDNET_SRC, default ../shared/peers/hybridnet, installed with its own chart): its overlay and untagged VLAN underlay pods reach each other and the external host (root).
	ESTUARY_E2E_CNI=hybridnet go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 40m -v -run '^TestHybridnet' ./test/e2e/

.PHONY: test-dualstack
test-dualstack: lab-deps ## The dual-stack e2e tests (DUALSTACK_TESTS) on a fresh dual-stack lab (estuary-lab up --ip-family dual) (root).
	bash hack/kube-binaries.sh e2e.test kubectl >/dev/null
	ESTUARY_E2E_IP_FAMILY=dual go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 30m -v -run '$(DUALSTACK_TESTS)' ./test/e2e/

.PHONY: chaos
chaos: lab-deps ## The chaos suite alone at full size (CHAOS_WAVES waves of 50 pods, default 20) on a fresh lab of its own (root).
	ESTUARY_CHAOS_WAVES=$(CHAOS_WAVES) go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 150m -v -run '^TestChaosNeverDuplicatesOrLeaks$$' ./test/e2e/

.PHONY: conformance
conformance: lab-deps ## Upstream [sig-network] [Conformance] e2e tests on a fresh estuary lab (IP_FAMILY=dual: the dual-stack tests on a dual-stack lab); prints N passed, N failed (root).
	bash hack/conformance.sh

.PHONY: conformance-netpol
conformance-netpol: lab-deps ## Every upstream NetworkPolicy e2e test (the Netpol suite) that fits the lab, on a fresh estuary lab; lists those left out and why; prints N passed, N failed (root).
	NETPOL=1 bash hack/conformance.sh

# The network-policy-api conformance tests make conformance-cnp runs: all, or
# their ShortNames separated by commas.
CNP_TESTS ?= all

.PHONY: conformance-cnp
conformance-cnp: lab-deps ## sigs.k8s.io/network-policy-api's own conformance suite (profile ClusterNetworkPolicy; CNP_TESTS, default all) on a fresh estuary lab; the upstream report in _output/conformance-cnp/report.yaml (root).
	CNP=1 CNP_TESTS='$(CNP_TESTS)' bash hack/conformance.sh

# The Kubernetes version make test-kube-version runs the lab on (the lab's
# default, v1.36.3, is the newest supported), and the e2e tests it runs
# there. v1.35.4: every staging module it needs is on the module proxy
# (docs/install.md#supported-kubernetes-versions).
OTHER_KUBE_VERSION ?= v1.35.4
KUBE_SMOKE_TESTS ?= TestPodToPodSameNodeAndAcrossNodes|TestNodeToPodKeepsNodeAddress|TestClusterIPServiceFromEveryNode|TestClusterDNS|TestDeploymentRecreatedGetsItsAddresses|TestUnderlayUntaggedVLAN|TestUninstallLeavesNodesAsBefore

.PHONY: test-kube-version
test-kube-version: lab-deps ## A smoke e2e (pods across nodes, Services, DNS, fixed IPs, underlay, uninstall) on a fresh lab running Kubernetes OTHER_KUBE_VERSION (default v1.35.4); builds that version first (root).
	ESTUARY_E2E_KUBERNETES_VERSION=$(OTHER_KUBE_VERSION) go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 100m \
		-run '^($(KUBE_SMOKE_TESTS))$$' -v ./test/e2e/

.PHONY: scale
scale: lab-deps ## estuary at scale: NODES fake nodes (kwok, default 1000) and PODS pods (default 50000) on a lab with one real node; prints allocation, webhook, API, manager and daemon figures (root; not part of make test).
	bash hack/scale.sh

.PHONY: bench
bench: ## Run the Go benchmarks (results go to docs/benchmarks.md).
	go test -run '^$$' -bench . -benchmem ./pkg/...

# Rounds of each way of killing the manager's leader in make bench-failover
# (make test runs 2).
FAILOVER_ROUNDS ?= 20

.PHONY: bench-failover
bench-failover: lab-deps ## Manager leader killed (pod deleted, container SIGKILLed) -> next pod's address, FAILOVER_ROUNDS rounds each on a fresh lab; prints p50/p99 (root).
	ESTUARY_E2E_FAILOVER_ROUNDS=$(FAILOVER_ROUNDS) go test $(GO_TEST_FLAGS) -p 1 -tags lab -timeout 60m -v -run '^TestManagerFailover$$' ./test/e2e/

.PHONY: bench-cni
bench-cni: ## CNI ADD latency, estuary vs ptp + host-local, on the node path (root; COUNT runs, default 3).
	bash hack/bench-cni.sh

.PHONY: fuzz
fuzz: ## Fuzz every fuzz target in the tree (hack/fuzz.sh finds them) for FUZZTIME (30s) each; FUZZ=regexp runs those whose <package dir>.<FuzzXxx> it matches.
	bash hack/fuzz.sh

.PHONY: lab
lab: ## Build the lab tool.
	@mkdir -p $(BIN)
	go build -o $(BIN)/estuary-lab ./cmd/estuary-lab

.PHONY: images
images: ## Build the estuary-manager and estuary-daemon images as docker-archive tarballs into IMAGES_DIR.
	go run -ldflags "$(VERSION_LDFLAGS)" ./cmd/estuary-lab images --out $(IMAGES_DIR)

# Where `make release` pushes images and the chart (host[:port]/path; empty:
# OCI layouts in RELEASE_DIR, nothing pushed), and where it writes the chart,
# the kubectl-estuary archives, their checksums and the krew manifest.
REGISTRY ?=
RELEASE_DIR ?= $(CURDIR)/_output/release

.PHONY: release
release: helm ## Release VERSION=X.Y.Z to REGISTRY: multi-arch images, the chart as an OCI artifact, kubectl-estuary archives and a krew manifest (docs/release.md).
	@if [ "$(origin VERSION)" = file ]; then echo 'make release: set VERSION=X.Y.Z (and REGISTRY=host[:port]/path); see docs/release.md' >&2; exit 1; fi
	go run -ldflags "$(VERSION_LDFLAGS)" ./cmd/estuary-release --release '$(VERSION)' --registry '$(REGISTRY)' \
		$(if $(filter 1 true yes,$(INSECURE)),--insecure) $(if $(filter 1 true yes,$(ALLOW_DIRTY)),--allow-dirty) \
		--out '$(RELEASE_DIR)' --helm '$(BIN)/helm'

.PHONY: registry
registry: ## Install the distribution registry into ./bin (bin/registry), built from the Go module proxy, to try a release locally.
	@bash hack/registry.sh >/dev/null

.PHONY: lab-deps
lab-deps: ## Install the Debian packages the lab and the tests need (quick when present).
	bash hack/lab-deps.sh

.PHONY: demo
demo: lab-deps ## Install what the lab needs, build, start a lab cluster and run a few pods across its nodes.
	bash hack/demo.sh

.PHONY: clean
clean:
	rm -rf $(BIN)

.PHONY: help
help:
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-18s %s\n", $$1, $$2}'
