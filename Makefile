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
lint: $(STAMP) ## ruff check, ruff format --check, mypy --strict and the import-layer contracts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

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

.PHONY: bench
bench: $(STAMP) $(if $(shell command -v go),kubeconform) ## Benchmark `check` on 10,000 DaskClusters, beside kubeconform (with Go)
	$(BIN)/python -m benchmarks.check_throughput $(if $(wildcard $(KUBECONFORM)),--kubeconform $(KUBECONFORM))

include provingground/provingground.mk
include tests/chart/chart.mk

# kubeconform, the schema validator the throughput target cites, built from the Go module proxy
# into the same cache as the proving-ground binaries.
KUBECONFORM_VERSION := v0.8.0
KUBECONFORM := $(DGP_CACHE)/bin/kubeconform-$(KUBECONFORM_VERSION)/kubeconform

.PHONY: kubeconform
kubeconform: $(KUBECONFORM) ## Build the pinned kubeconform the benchmark compares with

$(KUBECONFORM):
	GOBIN=$(dir $@) go install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)

DASK_CRDS = $(shell $(BIN)/python -c 'import dask_kubernetes, pathlib; print(pathlib.Path(dask_kubernetes.__file__).parent / "operator/deployment/helm/dask-kubernetes-operator/crds")' 2>/dev/null)

.PHONY: crd-schemas
crd-schemas: $(STAMP) ## Regenerate the bundled Dask CRD schemas from the dask-kubernetes package
	$(BIN)/python scripts/crd_schemas.py $(DASK_CRDS)/*.yaml > operator/dask_gpu_parity/core/data/dask_crds.json
