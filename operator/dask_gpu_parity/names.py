"""The fixed names of the design: API groups, annotations, labels, container names.

Every module reads them from here, so a name is spelled once. Pure constants: importable from
every layer.
"""

from __future__ import annotations

__all__ = [
    "CLUSTER_NAME_LABEL",
    "COMPONENT_LABEL",
    "CUDA_ANNOTATION",
    "DASK_API_VERSION",
    "DASK_GROUP",
    "DASK_VERSION",
    "DISTRIBUTION",
    "POLICY_API_VERSION",
    "POLICY_GROUP",
    "POLICY_KIND",
    "POLICY_PLURAL",
    "POLICY_VERSION",
    "PREFIX",
    "PROBE_DIR",
    "PROBE_IMAGE_REPOSITORY",
    "PROBE_IN_IMAGE",
    "SKIP_ANNOTATION",
    "VERIFIER_CONTAINER",
    "VERIFIER_COPY_CONTAINER",
    "VERIFIER_VOLUME",
]

DISTRIBUTION = "dask-gpu-parity"  # the distribution, the CLI, the chart and the webhook Service

# The dask-kubernetes operator's resources and the labels it puts on what it creates.
DASK_GROUP = "kubernetes.dask.org"
DASK_VERSION = "v1"
DASK_API_VERSION = f"{DASK_GROUP}/{DASK_VERSION}"
CLUSTER_NAME_LABEL = "dask.org/cluster-name"
COMPONENT_LABEL = "dask.org/component"

# Our own API group: the DaskGPUPolicy CRD, annotations, kopf's storage prefix and finalizer.
PREFIX = POLICY_GROUP = "gpuparity.dask.org"
POLICY_VERSION = "v1alpha1"
POLICY_API_VERSION = f"{POLICY_GROUP}/{POLICY_VERSION}"
POLICY_KIND = "DaskGPUPolicy"
POLICY_PLURAL = "daskgpupolicies"
SKIP_ANNOTATION = f"{PREFIX}/skip"  # opt-out, on a Dask resource or its namespace
CUDA_ANNOTATION = f"{PREFIX}/cuda-version"  # the CUDA version the image needs, e.g. "13.0"

VERIFIER_CONTAINER = "gpu-parity-check"  # the init container that proves the scheduler's GPU

# The verifier by reference (docs/probe.md): the GPU-less init container VERIFIER_COPY_CONTAINER
# copies PROBE_IN_IMAGE from this project's probe image into the emptyDir VERIFIER_VOLUME, which
# both init containers mount at PROBE_DIR; gpu-parity-check then runs it in the scheduler's image.
VERIFIER_COPY_CONTAINER = "gpu-parity-probe"
VERIFIER_VOLUME = "gpu-parity-probe"
PROBE_DIR = "/gpu-parity"
PROBE_IN_IMAGE = "/probe.py"  # where the Dockerfile's probe target puts probe.py
PROBE_IMAGE_REPOSITORY = "ghcr.io/dask-gpu-parity/dask-gpu-parity-probe"  # tag: the release
