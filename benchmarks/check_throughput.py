"""Throughput of `dask-gpu-parity check` over a generated corpus of DaskCluster manifests.

Usage: python benchmarks/check_throughput.py [--documents 10000] [--repeat 5]

Writes the corpus (one multi-document file, a realistic mix: GPU over TCP and UCX, already fixed,
CPU-only) to a temporary folder, then times, side by side in one process and alternating:

* ``parse``: reading the YAML alone (libyaml), the floor any checker pays;
* ``check``: the full CLI path, ``main(["check", FILE, "-o", "json"])``: parse, schema, rules,
  report.

Reports medians of the repeats, documents per second, the check/parse ratio and the peak RSS.
Pinned to one core where the OS allows it.
"""

from __future__ import annotations

import argparse
import copy
import io
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from dask_gpu_parity.cli import main  # noqa: E402
from dask_gpu_parity.manifests import Source, parse  # noqa: E402


def corpus(count: int) -> str:
    """``count`` DaskCluster documents as users write them: GPU over TCP and UCX, CPU-only."""
    tcp = yaml.safe_load((ROOT / "examples" / "gpu-cluster-tcp.yaml").read_text())
    ucx = yaml.safe_load((ROOT / "examples" / "gpu-cluster-ucx.yaml").read_text())
    cpu = yaml.safe_load((ROOT / "examples" / "cpu-cluster.yaml").read_text())
    templates = [tcp, tcp, ucx, cpu]
    docs = []
    for index in range(count):
        doc = copy.deepcopy(templates[index % len(templates)])
        doc["metadata"] = {"name": f"cluster-{index}", "namespace": f"team-{index % 50}"}
        docs.append(doc)
    return yaml.safe_dump_all(docs, sort_keys=False)


def run_once(path: Path, stage: str) -> float:
    start = time.perf_counter()
    if stage == "parse":
        parse(Source(str(path), path.read_text()))
    else:
        code = main(["check", str(path), "-o", "json"], out=io.StringIO(), err=io.StringIO())
        assert code == 1, code
    return time.perf_counter() - start


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.yaml"
        path.write_text(corpus(args.documents))
        size = path.stat().st_size
        times: dict[str, list[float]] = {"parse": [], "check": []}
        run_once(path, "check")  # warm-up: imports, schema load
        for _ in range(args.repeat):
            for stage, values in times.items():
                values.append(run_once(path, stage))
    med = {stage: statistics.median(values) for stage, values in times.items()}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"corpus: {args.documents} DaskCluster documents, {size / 2**20:.1f} MiB, one core")
    print(f"{'stage':<8}{'median s':>10}{'docs/s':>10}   runs")
    for stage, value in med.items():
        runs = " ".join(f"{t:.2f}" for t in times[stage])
        print(f"{stage:<8}{value:>10.2f}{args.documents / value:>10.0f}   {runs}")
    print(f"check/parse ratio: {med['check'] / med['parse']:.2f}")
    print(f"peak RSS: {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
