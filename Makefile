# nodegroup-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
BIN       ?= bin
CRD_DIR   := charts/nodegroup-operator-crds/templates
# UPDATE=1 rewrites golden files instead of comparing against them.
UPDATE    ?=
TEST_ARGS ?=
# E2E_ARGS go to the Go e2e suite, e.g. E2E_ARGS='-run TestPoolsReachReady'.
E2E_ARGS  ?=
# FUZZTIME is how long `make fuzz` runs each fuzz target.
FUZZTIME  ?= 2m
# FAULTS_ARGS go to the fault harness, e.g. FAULTS_ARGS='-short' (the short run) or '-seed 42'.
FAULTS_ARGS ?=

export UPDATE

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: generate
generate: ## Generate deepcopy code and the CRDs (into the chart).
	$(GO) tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/... paths=./internal/providers/...
	rm -f $(CRD_DIR)/*.yaml
	$(GO) tool controller-gen crd paths=./api/... output:crd:artifacts:config=$(CRD_DIR)
	$(GO) tool controller-gen rbac:roleName=nodegroup-operator paths=./internal/... output:rbac:artifacts:config=charts/nodegroup-operator/files/rbac

.PHONY: build
build: ## Build the binaries into ./bin.
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

.PHONY: testbin
testbin: ## Build (or find cached) etcd and kube-apiserver for the tests.
	@hack/testbin.sh

.PHONY: lint
lint: ## gofmt, go vet, staticcheck (staticcheck.conf), a tidy go.mod, and a clean tree after `make generate`.
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' | xargs -r ls -d 2>/dev/null)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags e2e ./e2e/...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod or go.sum is not tidy: run 'go mod tidy' and commit"; $(GO) mod tidy -diff; exit 1; }
	$(MAKE) --no-print-directory generate
	@if [ -n "$$(git status --porcelain -- api charts internal/providers)" ]; then \
		echo "generated files differ from the tree: run 'make generate' and commit"; git status --porcelain -- api charts internal/providers; git diff --stat; exit 1; fi

# -timeout 30m: the release dry run (internal/release) cross-compiles the operator and
# the plugin for six platforms, twice; on a cold build cache that alone passes go test's
# default of 10 minutes per package. (The suites build this machine's operator and
# plugin the same way, internal/gobuild, so those two of the six usually come from the
# build cache: when the suites that build them ran before internal/release.)
.PHONY: test
test: lint ## Lint, then run the unit and integration tests against a real kube-apiserver.
	@hack/testdeps.sh
	@start=$$SECONDS; assets=$$(hack/testbin.sh --all); echo "control-plane binaries ready in $$((SECONDS-start))s: $$assets"; \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -count=1 -timeout 30m $(TEST_ARGS) ./...
	bats e2e/*.bats

.PHONY: e2e
e2e: ## End-to-end suites (Go, then bats): the real Cluster API manager turns pools into Machines and Nodes.
	@hack/testdeps.sh
	@start=$$SECONDS; hack/testbin.sh --all >/dev/null && hack/e2ebin.sh >/dev/null; echo "e2e binaries ready in $$((SECONDS-start))s"
	@start=$$SECONDS; $(GO) test -tags e2e -count=1 -v -timeout 45m ./e2e/ $(E2E_ARGS); echo "e2e: Go suite took $$((SECONDS-start))s"
	@start=$$SECONDS; bats e2e/flow; echo "e2e: bats suite took $$((SECONDS-start))s"

.PHONY: fuzz
fuzz: ## Every fuzz target for FUZZTIME (default 2m) each; prints the executions of each and the total.
	@FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: faults
faults: ## Kill the operator 50 times across 200 pools' life and take its API servers away; check nothing is lost (FAULTS_ARGS=-short: the short run).
	@hack/testbin.sh --all >/dev/null && hack/e2ebin.sh >/dev/null
	@start=$$SECONDS; $(GO) run -tags e2e ./e2e/faults $(FAULTS_ARGS); echo "faults: took $$((SECONDS-start))s"

.PHONY: demo
demo: ## A local control plane, the operator, the example pools and what it made of them.
	@KUBEBUILDER_ASSETS=$$(hack/testbin.sh) $(GO) run ./hack/demo $(DEMO_ARGS)

.PHONY: bench
bench: ## Benchmarks of one pool's whole reconcile (first, steady) and the scale benchmark at 1,000 pools (SCALE_ARGS=); results in results/.
	$(GO) test -run '^$$' -bench Reconcile -benchmem -count 5 ./internal/controller/nodegroup/
	@KUBEBUILDER_ASSETS=$$(hack/testbin.sh) $(GO) run ./hack/scale -namespaces 200 -pools 5 -steady 1m -resyncs 3 -churn 1m $(SCALE_ARGS)

.PHONY: bench-full
bench-full: ## The scale benchmark at 5,000 pools with a 5-minute steady state (SCALE_ARGS=); results in results/.
	@KUBEBUILDER_ASSETS=$$(hack/testbin.sh) $(GO) run ./hack/scale -namespaces 1000 -pools 5 $(SCALE_ARGS)

.PHONY: images
images: ## The worker disk pipeline (MINOR=, ARCH=, PUSH=): every step this machine can run.
	@MINOR=$(MINOR) ARCH=$(ARCH) PUSH=$(PUSH) hack/images.sh

.PHONY: image
image: ## The operator image for linux/amd64 and arm64, without Docker: an OCI index in bin/image (IMAGE_TAG= pushes instead).
	@rm -rf $(BIN)/image
	@if [ -n "$(IMAGE_TAG)" ]; then $(GO) run ./hack/image --tag $(IMAGE_TAG); else $(GO) run ./hack/image --out $(BIN)/image; fi

.PHONY: release
release: ## What a version tag publishes (image index, SBOMs, charts, plugin, krew manifest) into $(BIN)/release, without pushing (VERSION=v0.2.0).
	@test -n "$(VERSION)" || { echo "release: set VERSION=v<major>.<minor>.<patch>"; exit 1; }
	$(GO) run ./hack/release --version $(VERSION) --out $(BIN)/release
