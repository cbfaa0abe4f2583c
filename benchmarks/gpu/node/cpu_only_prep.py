"""The CPU-only rule's Pods for the GPU node (``node.py --cpu-only DIR``), made here.

Runs ``dask-gpu-parity fix`` (the real CLI) on ``cpu_only/daskjob.yaml``, whose job runner runs
RAPIDS' CUDA image and requests no GPU (DGP029), and writes three Pods of that job runner as
JSON (``node.py`` has no YAML parser) into the output folder, with ``daskjob.fixed.yaml``:

- ``unfixed.json``: the runner as written;
- ``fixed.json``: the runner as ``fix`` wrote it (``NVIDIA_VISIBLE_DEVICES=void``);
- ``gpu.json``: the runner as written with ``nvidia.com/gpu: 1`` (a GPU container keeps its GPU).

Each Pod keeps the container's env and swaps the image for the node's dask image (which sets
``NVIDIA_VISIBLE_DEVICES=all`` in its configuration there, as RAPIDS' images do); its command
lists the container's NVIDIA device nodes after the image's entrypoint ran ``nvidia-smi -L``.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DASKJOB = HERE / "cpu_only" / "daskjob.yaml"
IMAGE = "localhost/gpunode/dask:local"
GPU = "nvidia.com/gpu"
SHOW = "echo 'devices:'; ls -l /dev/nvidia* 2>&1; true"


def runner(doc: dict[str, Any]) -> dict[str, Any]:
    """The DaskJob's job runner container."""
    container: dict[str, Any] = doc["spec"]["job"]["spec"]["containers"][0]
    return container


def pod(name: str, container: dict[str, Any], *, gpu: bool) -> dict[str, Any]:
    """A Pod of ``container`` on the GPU node: the node's image, tolerating its GPU taint."""
    c = copy.deepcopy(container)
    c["image"] = IMAGE
    c["imagePullPolicy"] = "Never"
    c["args"] = ["sh", "-c", SHOW]
    if gpu:
        c.setdefault("resources", {}).setdefault("limits", {})[GPU] = "1"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"runner-{name}", "labels": {"app": "cpu-only-runner"}},
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [c],
        },
    }


def main() -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cli", default="dask-gpu-parity", help="the dask-gpu-parity command")
    args = parser.parse_args()
    fixed_text = subprocess.run(
        [args.cli, "fix", str(DASKJOB)], check=True, capture_output=True, text=True
    ).stdout
    source = yaml.safe_load(DASKJOB.read_text())
    fixed = yaml.safe_load(fixed_text)
    env = {e["name"]: e.get("value") for e in runner(fixed).get("env", [])}
    if env.get("NVIDIA_VISIBLE_DEVICES") != "void":
        print(f"fix did not void the job runner's GPUs: env {env}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "daskjob.fixed.yaml").write_text(fixed_text)
    cases = {
        "unfixed": pod("unfixed", runner(source), gpu=False),
        "fixed": pod("fixed", runner(fixed), gpu=False),
        "gpu": pod("gpu", runner(source), gpu=True),
    }
    for name, manifest in cases.items():
        (args.out / f"{name}.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"cpu-only: {', '.join(cases)} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
