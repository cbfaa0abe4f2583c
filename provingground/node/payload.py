"""Prepare what the GPU node needs besides the binaries: PKI, kubeconfigs, images, manifests.

Run here (it needs ``cryptography``, ``dask-kubernetes`` and ``dask-gpu-parity`` from the dev
environment); the GPU machine has none of them, and gets the result as files:

    python -m provingground.node.payload .gpunode/payload

Writes into that folder:

- ``pki/``: cluster CA, API server serving certificate, admin, node (``system:node:gpu-node``)
  and front-proxy client certificates, service-account key pair; ``admin.kubeconfig`` and
  ``kubelet.kubeconfig`` for ``https://127.0.0.1:6443``.
- ``manifests/``: the DaskCluster of ``examples/gpu-cluster-tcp.yaml`` adapted to the GPU machine
  (local image; workers on ``NVIDIA-H200`` nodes), ``dask-gpu-parity fix``'s output for it, and
  the scheduler Deployment the dask operator would create from that output
  (``build_scheduler_deployment_spec`` of dask-kubernetes itself): ``scheduler-pass.yaml``, and
  ``scheduler-fail.yaml`` for the same cluster with ``CUDA_VISIBLE_DEVICES=""`` in the scheduler
  container's env (the case ``fix`` must turn into a failing init container).
- ``operator/``: CRDs, webhook configurations and a DaskGPUPolicy for the operators on the
  GPU machine's host (``benchmarks/gpu/node/operators.py``).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from provingground.cluster import APISERVER_NAMES
from provingground.kubeconfig import write_kubeconfig
from provingground.parity import webhook_config
from provingground.pki import CertificateAuthority, write_key

__all__ = ["IMAGE", "NODE_NAME", "SERVER", "main", "prepare"]

REPO = Path(__file__).resolve().parents[2]
NODE_NAME = "gpu-node"
SERVER = "https://127.0.0.1:6443"
IMAGE = "localhost/gpunode/dask:local"  # made on the GPU machine (benchmarks/gpu/node/image.py)
GPU_PRODUCT = "NVIDIA-H200"  # GFD's nvidia.com/gpu.product for "NVIDIA H200"
NAMESPACE = "gpu-parity"
WEBHOOK_PORT = 18443  # benchmarks/gpu/node/operators.py serves the webhooks there
PROBE_IMAGE = "localhost/gpunode/dask-gpu-parity-probe:local"  # made by image.py there


def _pki(out: Path) -> CertificateAuthority:
    pki = out / "pki"
    ca = CertificateAuthority.create(pki)
    ca.issue(
        "apiserver",
        common_name="kube-apiserver",
        hostnames=list(APISERVER_NAMES),
    )
    admin = ca.issue("admin", common_name="admin", organizations=["system:masters"], client=True)
    node = ca.issue(
        "node",
        common_name=f"system:node:{NODE_NAME}",
        organizations=["system:nodes"],
        client=True,
    )
    ca.issue("front-proxy-client", common_name="front-proxy-client", client=True)
    write_key(pki / "sa.key")
    write_kubeconfig(out / "admin.kubeconfig", SERVER, ca.cert_path, *admin)
    write_kubeconfig(out / "kubelet.kubeconfig", SERVER, ca.cert_path, *node)
    return ca


def _local_cluster() -> dict[str, Any]:
    """examples/gpu-cluster-tcp.yaml with the local image and the GPU machine's product."""
    doc: dict[str, Any] = yaml.safe_load((REPO / "examples" / "gpu-cluster-tcp.yaml").read_text())
    spec = doc["spec"]
    for part in (spec["scheduler"]["spec"], spec["worker"]["spec"]):
        for container in part["containers"]:
            container["image"] = IMAGE
    spec["worker"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": GPU_PRODUCT}
    spec["worker"]["replicas"] = 1
    doc["metadata"]["namespace"] = NAMESPACE
    return doc


def _fix(doc: dict[str, Any], path: Path, policy: Path) -> dict[str, Any]:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    cli = Path(sys.executable).with_name("dask-gpu-parity")
    proc = subprocess.run(
        [str(cli), "fix", "--policy", str(policy), str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise RuntimeError(f"dask-gpu-parity fix {path} failed: {proc.stderr.strip()}")
    fixed: dict[str, Any] = yaml.safe_load(proc.stdout)
    path.with_name(path.stem + "-fixed.yaml").write_text(proc.stdout)
    return fixed


def _worker(cluster: dict[str, Any]) -> dict[str, Any]:
    from dask_kubernetes.operator.controller.controller import (  # noqa: PLC0415
        build_worker_deployment_spec,
    )

    name = cluster["metadata"]["name"]
    worker = build_worker_deployment_spec(
        "default", NAMESPACE, name, "0", copy.deepcopy(cluster["spec"]["worker"]["spec"]), {}, {}
    )
    worker["metadata"]["namespace"] = NAMESPACE
    return worker


def _deployment(cluster: dict[str, Any]) -> dict[str, Any]:
    from dask_kubernetes.operator.controller.controller import (  # noqa: PLC0415
        build_scheduler_deployment_spec,
    )

    name = cluster["metadata"]["name"]
    deployment = build_scheduler_deployment_spec(
        name, copy.deepcopy(cluster["spec"]["scheduler"]["spec"]), {}, {}
    )
    deployment["metadata"]["namespace"] = NAMESPACE
    return deployment


def _manifests(out: Path, policy: Path) -> None:
    man = out / "manifests"
    man.mkdir(parents=True, exist_ok=True)
    passing = _local_cluster()
    failing = copy.deepcopy(passing)
    failing["metadata"]["name"] = "rapids-tcp-nogpu"
    failing["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] = failing[
        "metadata"
    ]["name"]
    scheduler = failing["spec"]["scheduler"]["spec"]["containers"][0]
    scheduler["env"] = [{"name": "CUDA_VISIBLE_DEVICES", "value": ""}]

    def write(path: Path, doc: dict[str, Any]) -> None:
        plain = json.loads(json.dumps(doc))  # no YAML anchors for shared label maps
        path.write_text(yaml.safe_dump(plain, sort_keys=False))

    for name, doc in (("pass", passing), ("fail", failing)):
        fixed = _fix(doc, man / f"daskcluster-{name}.yaml", policy)
        write(man / f"scheduler-{name}.yaml", _deployment(fixed))
    # The CuPy example through real pods: the RAPIDS cluster as written (scheduler without GPU)
    # and as fixed, each with one GPU worker (the operator's own worker Deployment).
    for name in ("without", "with"):
        doc = copy.deepcopy(passing)
        doc["metadata"]["name"] = f"cupy-{name}"
        doc["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] = f"cupy-{name}"
        if name == "with":
            doc = _fix(doc, man / "daskcluster-cupy-with.yaml", policy)
        write(man / f"cupy-{name}-scheduler.yaml", _deployment(doc))
        write(man / f"cupy-{name}-worker.yaml", _worker(doc))


def _operator(out: Path, ca: CertificateAuthority) -> None:
    """What ``benchmarks/gpu/node/operators.py`` needs to run both operators on the host.

    ``operator/``: the DaskCluster CRDs (dask-kubernetes' own) and ours, the webhook
    configurations ``dask-gpu-parity webhook-config`` writes for ``https://127.0.0.1:18443``
    (``failurePolicy: Fail``); ``pki/webhook.{crt,key}`` serve the webhooks.
    """
    from provingground.dask_operator import crd_paths  # noqa: PLC0415  # dask-kubernetes here

    ops = out / "operator"
    (ops / "crds").mkdir(parents=True, exist_ok=True)
    for path in [*crd_paths(), *sorted((REPO / "crds").glob("*.yaml"))]:
        shutil.copy2(path, ops / "crds" / path.name)
    ca.issue("webhook", common_name="dask-gpu-parity", hostnames=["127.0.0.1", "localhost"])
    config = webhook_config(f"https://127.0.0.1:{WEBHOOK_PORT}", ca.cert_path)
    (ops / "webhooks.yaml").write_text(config)


def _policy(out: Path) -> Path:
    """The DaskGPUPolicy of the namespace: the probe image made on the GPU machine.

    The webhook applies it (``operators.py``) and ``fix`` reads it for the manifests.
    """
    policy = {
        "apiVersion": "gpuparity.dask.org/v1alpha1",
        "kind": "DaskGPUPolicy",
        "metadata": {"name": "gpunode"},
        "spec": {
            "mode": "enforce",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
            "verifier": {"image": PROBE_IMAGE},
        },
    }
    path = out / "operator" / "policy.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def prepare(out: Path) -> Path:
    """Write the payload into ``out`` (replacing it); return ``out``."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ca = _pki(out)
    _manifests(out, _policy(out))
    _operator(out, ca)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m provingground.node.payload OUT``."""
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0] if args else ".gpunode/payload")
    prepare(out)
    print(f"gpunode payload: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
