"""The DRA GPU plugin on a real node: how it runs, the DeviceClass, GPUs for a machine without one.

``draplugin/`` is a stand-in for NVIDIA's DRA driver (its package doc and docs/proving-ground.md
say what it does the same and what not): driver ``gpu.nvidia.com``, one ResourceSlice per node,
claims prepared as CDI specs in the node's own CDI folder. ``RealNode(dra=DraPlugin(...))`` starts
it after kubelet, or ``RealNode.start_dra()`` on a running node. Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provingground.process import Process

from . import cleanup

if TYPE_CHECKING:
    from .harness import RealNode

__all__ = [
    "DEVICE_CLASS",
    "DRIVER",
    "DraPlugin",
    "device_class",
    "node_slices",
    "plugin_argv",
    "sample_gpus",
    "start",
    "stop",
    "write_devices",
]

DRIVER = "gpu.nvidia.com"
DEVICE_CLASS = "gpu.nvidia.com"


@dataclass(frozen=True)
class DraPlugin:
    """The plugin to run: its binary, and its GPUs from ``devices`` (JSON) or NVML when None."""

    binary: Path
    devices: Path | None = None


def device_class() -> dict[str, Any]:
    """DeviceClass ``gpu.nvidia.com`` as NVIDIA's Helm chart renders it for ``resource.k8s.io/v1``.

    Source: kubernetes-sigs/dra-driver-nvidia-gpu ``deployments/helm/dra-driver-nvidia-gpu/
    templates/deviceclass-gpu.yaml`` (``extendedResourceName`` only on the v1 API).
    """
    expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {
            "selectors": [{"cel": {"expression": expression}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }


def sample_gpus(count: int = 1) -> list[dict[str, Any]]:
    """``count`` H200s as NVML reports them on the GPU machine (docs/gpu-node.md), fake UUIDs.

    The plugin's ``--devices`` format: driver 580.159.04 and CUDA 13.0, which it publishes
    normalised (``580.159.4``, ``13.0.0``) as NVIDIA's driver does.
    """
    return [
        {
            "minor": i,
            "uuid": f"GPU-00000000-0000-4000-8000-{i:012d}",
            "productName": "NVIDIA H200",
            "brand": "Nvidia",
            "architecture": "Hopper",
            "cudaComputeCapability": "9.0",
            "driverVersion": "580.159.04",
            "cudaDriverVersion": "13.0",
            "memoryBytes": 150754820096,
        }
        for i in range(count)
    ]


def write_devices(path: Path, gpus: list[dict[str, Any]]) -> Path:
    """Write ``gpus`` as the plugin's ``--devices`` file; return ``path``."""
    path.write_text(json.dumps(gpus, indent=1))
    return path


def plugin_argv(
    plugin: DraPlugin, *, node: str, kubeconfig: Path, kubelet_root: Path, cdi_dir: Path
) -> list[str]:
    """The plugin's command line: registered in kubelet's ``plugins_registry`` under its root."""
    return [
        str(plugin.binary),
        f"--node-name={node}",
        f"--kubeconfig={kubeconfig}",
        f"--registrar-dir={kubelet_root / 'plugins_registry'}",
        f"--plugin-dir={kubelet_root / 'plugins' / DRIVER}",
        f"--cdi-dir={cdi_dir}",
        *([f"--devices={plugin.devices}"] if plugin.devices else []),
        "--v=2",
    ]


def start(node: RealNode, plugin: DraPlugin) -> None:
    """Apply the DeviceClass, start ``plugin`` on the running ``node``, wait for its slice."""
    node.dra = plugin
    found = node.kubectl("get", "deviceclass", DEVICE_CLASS, "--ignore-not-found", "-o", "name")
    if not found.strip():  # another's class is left as it is, and not deleted at stop
        node.kubectl("create", "-f", "-", input=json.dumps(device_class()))
        node.facts["dra_device_class_created"] = True
    argv = plugin_argv(
        plugin,
        node=node.name,
        kubeconfig=node.admin_kubeconfig,
        kubelet_root=node.kubelet_root,
        cdi_dir=node.cdi_dir,
    )
    log = node.logs / "dra-gpu-plugin.log"
    proc = Process("dra-gpu-plugin", argv, log, env=node.env, cwd=node.root)
    node.processes["dra-gpu-plugin"] = proc
    cleanup.record(node)
    what = "its ResourceSlice published"
    proc.wait_until(lambda: bool(node_slices(node)), node.start_timeout, what, interval=0.2)


def stop(node: RealNode) -> None:
    """Stop the plugin on ``node``; a later ``node.start()`` no longer starts it.

    Its ResourceSlices are deleted (kubelet would only after a grace period), and the DeviceClass
    if ``start`` created it, so later tests see no GPU on the real node.
    """
    node.dra = None
    if proc := node.processes.pop("dra-gpu-plugin", None):
        proc.stop(timeout=10)
        cleanup.record(node)
    for slice_ in node_slices(node):
        node.kubectl("delete", "resourceslice", slice_["metadata"]["name"], "--ignore-not-found")
    if node.facts.pop("dra_device_class_created", False):
        node.kubectl("delete", "deviceclass", DEVICE_CLASS, "--ignore-not-found")


def node_slices(node: RealNode) -> list[dict[str, Any]]:
    """The ResourceSlices of driver ``gpu.nvidia.com`` for ``node``."""
    out = node.kubectl("get", "resourceslices", "-o", "json", check=False, timeout=15)
    items: list[dict[str, Any]] = json.loads(out).get("items", []) if out else []
    return [
        s for s in items if s["spec"].get("nodeName") == node.name and s["spec"]["driver"] == DRIVER
    ]
