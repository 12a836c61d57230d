# Fleetwright — every target does its own set-up on a fresh machine (Go is the only prerequisite).
#   make demo   the whole local stack up, then the getting-started scale-up with timings
#   make test   everything CI runs: generated-code checks, unit, e2e (real control plane), images, fuzz
#   make help   every target, from the "## " comments below
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

# Checksum lookups through the module proxy fail for exactly these two modules.
export GONOSUMDB := k8s.io/kubernetes,k8s.io/controller-manager

SERVICES := pod-watcher scheduler launcher terminator
PACKAGES := ./pkg/... ./proto/... $(foreach s,$(SERVICES),./services/$(s)/...) ./tools/...
MODULES  := proto pkg tools $(foreach s,$(SERVICES),services/$(s)) tools/devtools tools/imagebuild tools/karpenter-e2e/suites
LOCAL    := .local
BIN      := $(LOCAL)/bin
# Code generators and linters, pinned in tools/devtools (a module outside go.work), built here.
DEVTOOLS := $(CURDIR)/$(LOCAL)/tools
export PATH := $(DEVTOOLS):$(PATH)
FUZZTIME ?= 15s
TEST_TIMEOUT ?= 60m
# Images: the version stamped into the binaries (pkg/service.Version) and the tag; the platforms.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: help build test unit fuzz images images-check lint promtool tidy tidy-check devtools proto proto-check crds crds-check cluster-bin peer-bin stack-bin up down status demo clean karpenter-e2e karpenter-e2e-subset

help: ## this list
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z][a-zA-Z0-9_-]*:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## compile every module; the services and the CLI (fleetwright, kubectl-fleetwright) into bin/
	go build $(PACKAGES)
	go build -o bin/ $(foreach s,$(SERVICES),./services/$(s)) ./tools/fleetwright ./tools/kubectl-fleetwright

cluster-bin: ## etcd, kube-*, kubectl, kwok and Jaeger built once into ~/.cache/fleetwright (progress shown)
	go run ./tools/stack build

peer-bin: ## Karpenter's kwok provider (tools/localcluster/modules/karpenter) built once into ~/.cache/fleetwright, for tools/scale --peer karpenter
	go run ./tools/stack build-peer

# The services make up runs; a service joins the list once it does something.
STACK_SERVICES ?= pod-watcher scheduler launcher terminator

stack-bin: ## the stack's binaries (stack, awsemu, the services, nats-server) into .local/bin
	@mkdir -p $(BIN)
	@rm -f $(foreach s,$(SERVICES),$(BIN)/$(s))
	go build -o $(BIN)/ ./tools/stack ./tools/awsemu/cmd/awsemu $(foreach s,$(STACK_SERVICES),./services/$(s))
	go build -o $(BIN)/nats-server github.com/nats-io/nats-server/v2

test: tidy-check proto-check crds-check cluster-bin peer-bin unit images-check fuzz ## what CI runs: tidy and generated-code checks, unit and e2e tests, the images, fuzz

# The image builder (tools/imagebuild, a module outside go.work, go-containerregistry pinned there).
$(DEVTOOLS)/imagebuild: tools/imagebuild/*.go tools/imagebuild/go.mod tools/imagebuild/go.sum
	@GOWORK=off go -C tools/imagebuild build -o $(DEVTOOLS)/ .

images: $(DEVTOOLS)/imagebuild ## the four services' images, multi-arch, no Docker: REGISTRY=host/path pushes them, else OCI archives in .local/images
	imagebuild --root . --version $(VERSION) --platforms $(PLATFORMS) $(if $(REGISTRY),--registry $(REGISTRY),--oci-dir $(LOCAL)/images) $(SERVICES)

images-check: ## build the images to OCI archives and run each one's binary (--help, --version)
	GOWORK=off go -C tools/imagebuild test -count=1 -timeout $(TEST_TIMEOUT) ./...

unit: ## every package's tests, unit and e2e (a real control plane, NATS in-process)
	go test -count=1 -timeout $(TEST_TIMEOUT) $(PACKAGES)

# Each fuzz target runs for a bounded time; the seed corpus already ran in `unit`.
fuzz: ## every Fuzz target for FUZZTIME (15s) each
	@for spec in $$(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' pkg tools services | sort); do \
	  dir=./$$(dirname $$spec); \
	  for f in $$(grep -hoE '^func Fuzz[A-Za-z0-9_]+' $$spec | sed 's/^func //'); do \
	    echo "fuzz: $$dir $$f for $(FUZZTIME)"; \
	    go test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$dir; \
	  done; \
	done

lint: tidy-check devtools promtool ## go vet, staticcheck, buf lint and breaking-change check (tools pinned in tools/devtools), promtool on the rules in deploy/ and the docs
	go vet $(PACKAGES)
	staticcheck $(PACKAGES)
	tools/promtool/check-rules.sh $(DEVTOOLS)/promtool
	cd proto && buf lint
	@if git rev-parse --verify -q main >/dev/null && git cat-file -e main:proto/buf.yaml 2>/dev/null; then \
	  cd proto && buf breaking --against '../.git#branch=main,subdir=proto'; \
	else echo "buf breaking: no proto on main yet, nothing to compare"; fi

tidy: ## go mod tidy in every module
	@for m in $(MODULES); do (cd $$m && GOWORK=off go mod tidy); done

tidy-check: ## fail if a module is not tidy, a Go file is not gofmt-formatted, or a service does not build on its own (without go.work)
	@unformatted=$$(git ls-files -z '*.go' | xargs -0 gofmt -l); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted (run gofmt -w on them):"; echo "$$unformatted"; exit 1; fi; \
	echo "every Go file is gofmt-formatted"
	@for m in $(MODULES); do \
	  if ! (cd $$m && GOWORK=off go mod tidy -diff); then echo "$$m: go.mod/go.sum not tidy: run 'make tidy' and commit the result"; exit 1; fi; \
	done; echo "every module is tidy"
	@for s in $(SERVICES); do (cd services/$$s && GOWORK=off go build -o /dev/null .) || { echo "services/$$s does not build without go.work"; exit 1; }; done; \
	echo "every service builds on its own"

devtools: ## buf, protoc-gen-go, staticcheck and controller-gen, built once into .local/tools
	@GOWORK=off go -C tools/devtools build -o $(DEVTOOLS)/ github.com/bufbuild/buf/cmd/buf google.golang.org/protobuf/cmd/protoc-gen-go \
	  honnef.co/go/tools/cmd/staticcheck sigs.k8s.io/controller-tools/cmd/controller-gen

promtool: ## promtool, pinned in tools/promtool (a module of its own: Prometheus's dependency tree stays out of every other), built once into .local/tools
	@GOWORK=off go -C tools/promtool build -o $(DEVTOOLS)/ github.com/prometheus/prometheus/cmd/promtool

proto: devtools ## regenerate proto/gen from proto/**/*.proto
	cd proto && rm -rf gen && buf generate

proto-check: devtools ## fail if the committed generated code is stale
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	(cd proto && buf generate -o $$tmp); \
	if ! diff -r $$tmp/gen proto/gen >/dev/null; then \
	  diff -r $$tmp/gen proto/gen | head -20; \
	  echo "proto/gen is stale: run 'make proto' and commit the result"; exit 1; \
	fi; echo "proto/gen is up to date"

crds: devtools ## regenerate deepcopy and deploy/crds from pkg/apis (controller-gen pinned in tools/devtools; tools/crdpatch bounds what markers cannot reach and refuses unknown fields)
	controller-gen object paths=./pkg/apis/...
	rm -f deploy/crds/*_*.yaml
	controller-gen crd paths=./pkg/apis/... output:crd:artifacts:config=deploy/crds
	go run ./tools/crdpatch deploy/crds

crds-check: devtools ## fail if deploy/crds or the generated deepcopy are stale
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	controller-gen crd paths=./pkg/apis/... output:crd:artifacts:config=$$tmp/crds; \
	go run ./tools/crdpatch $$tmp/crds; \
	if ! diff -r -x kustomization.yaml $$tmp/crds deploy/crds >/dev/null; then \
	  diff -r -x kustomization.yaml $$tmp/crds deploy/crds | head -20; \
	  echo "deploy/crds is stale: run 'make crds' and commit the result"; exit 1; fi; \
	for f in $$(find pkg/apis -name zz_generated.deepcopy.go); do mkdir -p $$tmp/dc/$$(dirname $$f); cp $$f $$tmp/dc/$$f; done; \
	controller-gen object paths=./pkg/apis/...; \
	for f in $$(find pkg/apis -name zz_generated.deepcopy.go); do \
	  if ! cmp -s $$f $$tmp/dc/$$f; then cp $$tmp/dc/$$f $$f; echo "$$f is stale: run 'make crds' and commit the result"; exit 1; fi; done; \
	echo "deploy/crds and deepcopy are up to date"

up: stack-bin ## the local stack in the background: control plane, kwok, NATS, Jaeger, the AWS emulator and the four services (.local/env)
	$(BIN)/stack up

down: ## stop everything make up or make demo started
	@if [ -x $(BIN)/stack ]; then $(BIN)/stack down; else echo "stack: not running"; fi

status: ## what the local stack runs, and whether each part is ready
	@if [ -x $(BIN)/stack ]; then $(BIN)/stack status; else echo "stack: not running"; fi

# Karpenter's own e2e suites (pinned in tools/karpenter-e2e/suites, a module outside go.work),
# run against `make up`'s stack in batches; the table goes to docs/karpenter-e2e.md. Hours.
# KARPENTER_E2E_ARGS narrows it, e.g. --batch validation,strict or --focus 'Drift'.
karpenter-e2e: ## Karpenter's regression and scheduling suites against `make up`'s stack (make up first)
	go run ./tools/karpenter-e2e $(if $(KARPENTER_E2E_ARGS),$(KARPENTER_E2E_ARGS),--out docs/karpenter-e2e.md)

karpenter-e2e-subset: ## only the 20 stable specs of Karpenter's suites make test runs, on a private stack (builds the suites: ~10 min cold)
	go test -count=1 -timeout $(TEST_TIMEOUT) -run TestKarpenterSuitesSubset ./tools/karpenter-e2e/

demo: stack-bin ## up, then the getting-started scale-up
	$(BIN)/stack demo

clean: down ## make down, then remove bin/ and .local/
	rm -rf bin $(LOCAL)
