"""The CPU-only rule on the GPU node (``node.py --cpu-only DIR``): DGP029 before and after ``fix``.

Standard library only, like ``node.py``. containerd's default runtime is NVIDIA's container
runtime (``nvidia-container-runtime``, built by ``cpu_only.sh``) in its CDI mode: it turns a
container's ``NVIDIA_VISIBLE_DEVICES`` into CDI devices of kind ``nvidia.com/gpu`` from the spec
``nvidia-ctk cdi generate`` wrote (``/etc/cdi/nvidia.yaml``), as a node whose default runtime is
NVIDIA's does. Then three Pods of a DaskJob's job runner (``cpu_only_prep.py`` made them here):
the runner as written (the image's ``NVIDIA_VISIBLE_DEVICES=all``, no GPU request), the runner
as ``dask-gpu-parity fix`` wrote it (``NVIDIA_VISIBLE_DEVICES=void``), and the runner with
``nvidia.com/gpu: 1``. Each one's log (``nvidia-smi -L`` from the image's entrypoint, the device
nodes) and the runtime's log lines (the CDI devices it injected, per container bundle) go into the
summary's ``cpu_only``.

Without a GPU (``--no-gpu``) a stand-in CDI spec in the node's ``cdi`` folder gives the device
``nvidia.com/gpu=all`` one environment variable, so the chain runs: the runtime resolves ``all``
for the first Pod and nothing for the second.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

RUNTIME = "nvidia-container-runtime"
CASES = ("unfixed", "fixed", "gpu")
STAND_IN_ENV = "NVIDIA_STAND_IN_GPU=all"  # a name container_spec records


def configure(root: Path, bin_dir: Path, node_root: Path) -> Path:
    """The runtime's config.toml (CDI mode) and a wrapper containerd runs; returns the wrapper.

    The wrapper points ``XDG_CONFIG_HOME`` at the node's own ``etc``, so nothing goes into the
    host's ``/etc/nvidia-container-runtime``.
    """
    etc = root / "etc"
    conf = etc / "nvidia-container-runtime" / "config.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(
        f"""[nvidia-container-runtime]
debug = "{root / "logs" / "nvidia-container-runtime.log"}"
log-level = "debug"
mode = "cdi"
runtimes = ["{bin_dir / "runc"}"]

[nvidia-container-runtime.modes.cdi]
default-kind = "nvidia.com/gpu"
annotation-prefixes = ["cdi.k8s.io/"]
spec-dirs = ["/etc/cdi", "/var/run/cdi", "{node_root / "cdi"}"]

[nvidia-ctk]
path = "{bin_dir / "nvidia-ctk"}"
"""
    )
    wrapper = bin_dir / "nvidia-container-runtime-node"
    wrapper.write_text(f'#!/bin/sh\nXDG_CONFIG_HOME="{etc}" exec "{bin_dir / RUNTIME}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def stand_in_spec(node_root: Path) -> Path:
    """Without a GPU: a CDI spec whose ``nvidia.com/gpu=all`` sets one variable."""
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [{"name": "all", "containerEdits": {"env": [STAND_IN_ENV]}}],
        "containerEdits": {},
    }
    path = node_root / "cdi" / "gpunode-stand-in.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))
    return path


def run(node: Any, pods: Path, wait: Any) -> None:
    """Apply the three Pods one after the other; record each one's log and runtime edits."""
    ns = "cpu-only"
    node.kubectl("create", "namespace", ns, check=True)
    wait(
        f"ServiceAccount {ns}/default",
        lambda: node.api.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"),
        60,
        node.log,
    )
    results: dict[str, Any] = {}
    node.summary["cpu_only"] = results
    for name in CASES:
        doc = json.loads((pods / f"{name}.json").read_text())
        if not node.gpu:  # no device plugin here: the GPU request cannot be met
            for c in doc["spec"]["containers"]:
                c.get("resources", {}).get("limits", {}).pop("nvidia.com/gpu", None)
        pod_name = doc["metadata"]["name"]
        manifest = node.root / f"cpu-only-{name}.json"
        manifest.write_text(json.dumps(doc))
        node.log(f"== cpu-only {name}: kubectl apply -f {manifest.name}")
        t = time.monotonic()
        node.log(node.kubectl("apply", "-n", ns, "-f", str(manifest), check=True))
        path = f"/api/v1/namespaces/{ns}/pods/{pod_name}"

        def finished(p: str = path) -> bool:
            phase = (node.api.get(p) or {}).get("status", {}).get("phase")
            return phase in ("Succeeded", "Failed")

        wait(f"pod {pod_name} finished", finished, 120, node.log, every=0.25)
        pod = node.api.get(path) or {}
        statuses = pod.get("status", {}).get("containerStatuses", [])
        cid = statuses[0].get("containerID", "").split("://")[-1] if statuses else ""
        log = node.kubectl("logs", "-n", ns, pod_name)
        results[name] = {
            "env": doc["spec"]["containers"][0].get("env", []),
            "limits": doc["spec"]["containers"][0].get("resources", {}).get("limits", {}),
            "phase": pod.get("status", {}).get("phase"),
            "seconds": round(time.monotonic() - t, 2),
            "log": log.splitlines(),
            # The spec containerd gave the runtime, before the runtime's CDI edits: those show
            # in the container (the log) and in the runtime's own log.
            "cri_spec": node.container_spec(cid) if cid else {},
        }
        node.log(f"cpu-only {name}:", json.dumps(results[name], indent=1))
    runtime_log = node.root / "logs" / "nvidia-container-runtime.log"
    if runtime_log.exists():
        lines = runtime_log.read_text(errors="replace").splitlines()
        keep = ("Using bundle", "CDI", "No devices requested", "error")
        results["runtime_log"] = [ln[:400] for ln in lines if any(k in ln for k in keep)][-60:]
