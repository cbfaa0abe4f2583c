# Proving-ground targets (see docs/proving-ground.md). Included by the top-level Makefile.
#
# Binaries are cached OUTSIDE the clone, keyed by version, so a fresh clone on the same
# machine (CI clones into a new folder) reuses them:  $(DGP_CACHE)/bin/<k8s version>/
PG_DIR := provingground
K8S_VERSION := $(shell sed -n 's/^K8S_VERSION=//p' $(PG_DIR)/tools/versions.env)
DGP_CACHE ?= $(HOME)/.cache/dask-gpu-parity
DGP_BIN ?= $(DGP_CACHE)/bin/$(K8S_VERSION)
export DGP_BIN
# Node pools of proving-ground, ground and demo: device-plugin (default), pure-dra, mixed, migrating.
FLEET ?= device-plugin

.PHONY: controlplane
controlplane: ## Build (cold ~30 min) or reuse (seconds) etcd, kube-*, kubectl, kwok, helm
	@$(PG_DIR)/tools/build.sh $(DGP_BIN)

.PHONY: controlplane-gomod
controlplane-gomod: ## Regenerate the tools go.mod/go.sum (staging replaces); K8S=vX.Y.Z to switch
	$(PG_DIR)/tools/gen-gomod.sh $(or $(K8S),$(K8S_VERSION))

.PHONY: controlplane-clean
controlplane-clean: ## Delete this version's cached proving-ground binaries
	rm -rf $(DGP_BIN) $(DGP_BIN).partial

.PHONY: e2e
e2e: $(STAMP) controlplane node images ## e2e tests (tests/e2e/install: helm install on the real node) and the proving ground's own
	$(BIN)/pytest tests/e2e provingground/tests

.PHONY: demo
demo: $(STAMP) controlplane node images ## helm install of both operators on the real node + examples/: where Pods land
	$(BIN)/python -m provingground.demo --fleet $(FLEET)

.PHONY: peer-suite
peer-suite: $(STAMP) controlplane node images ## dask-kubernetes' own operator tests on the ground, without and with our chart
	$(BIN)/python -m provingground.peersuite

.PHONY: demo-down
demo-down: ## Stop anything an interrupted `make demo` left running
	@$(BIN)/python -m provingground.down .run/demo .run/proving-ground

.PHONY: proving-ground
proving-ground: $(STAMP) controlplane ## Start the proving ground and keep it up until Ctrl-C (FLEET=mixed: DRA pools too)
	$(BIN)/python -m provingground.up --fleet $(FLEET)

.PHONY: node
node: $(STAMP) ## Build or reuse the real node (kubelet, containerd, kube-proxy, CoreDNS, the DRA GPU plugin); apt-installs libseccomp-dev iptables nftables iproute2 if missing
	@$(PG_DIR)/node/host-packages.sh
	@d="$$($(BIN)/python -c 'from provingground.node import node_dir; print(node_dir())')" && \
	  { [ -s "$$d/images/busybox.tar" ] || $(BIN)/python -m provingground.node.testimage "$$d/images/busybox.tar"; } && \
	  $(PG_DIR)/node/build.sh --node "$$d"
	@$(PG_DIR)/node/build.sh --dra "$$($(BIN)/python -c 'from provingground.node import dra_plugin_dir; print(dra_plugin_dir())')"

.PHONY: ground
ground: $(STAMP) controlplane node ## The proving ground with the real node joined, until Ctrl-C (FLEET=mixed: DRA pools too)
	$(BIN)/python -m provingground.up --real-node --fleet $(FLEET)

.PHONY: gpunode
gpunode: $(STAMP) ## Build the one-node GPU cluster (binaries, xz bundle, PKI, images, manifests) into .gpunode/
	@$(PG_DIR)/node/host-packages.sh
	$(PG_DIR)/node/build.sh .gpunode
	$(BIN)/python -m provingground.node.payload .gpunode/payload
	$(PG_DIR)/node/wheels.sh .gpunode/wheels
	$(PG_DIR)/node/operator_site.sh .gpunode/site
	benchmarks/gpu/node/cpu_only.sh .gpunode $(BIN)/python

# Our images, built from the Dockerfile with BuildKit (no Docker, no registry) into .images/ as OCI
# archives, with .images/images.json (provingground/images/). BuildKit is built from its Go module
# into the version-keyed cache; RUN steps run with the real node's runc (`make node`).
BUILDKIT_VERSION := $(shell sed -n 's/^BUILDKIT_VERSION=//p' $(PG_DIR)/images/versions.env)
BUILDKIT_BIN ?= $(DGP_CACHE)/bin/buildkit-$(BUILDKIT_VERSION)

.PHONY: buildkit
buildkit: ## Build (cold ~5 min) or reuse the pinned BuildKit (buildkitd, buildctl)
	@$(PG_DIR)/images/buildkit.sh $(BUILDKIT_BIN)

.PHONY: images
images: $(STAMP) buildkit node ## Build our images and the dask operator's as OCI archives into .images/ (RUNC=path/to/runc); apt-installs debootstrap if missing
	@$(PG_DIR)/node/host-packages.sh debootstrap
	@runc="$${RUNC:-$$($(BIN)/python -c 'from provingground.node import node_dir; print(node_dir())')/bin/runc}" && \
	  $(BIN)/python -m provingground.images --buildkit $(BUILDKIT_BIN) --runc "$$runc"
