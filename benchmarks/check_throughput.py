"""Throughput of `dask-gpu-parity check` over a generated corpus of DaskCluster manifests.

Usage, from the repository root:
    python -m benchmarks.check_throughput [--documents 10000] [--repeat 5] [--kubeconform BIN]

Writes the corpus (one multi-document file, a realistic mix: GPU over TCP and UCX, CPU-only) to a
temporary folder, then times, side by side in one process and alternating:

* ``pyyaml``: reading the YAML with PyYAML's libyaml loader alone (what reading cost before the
  fast path, and the floor of any checker built on PyYAML);
* ``parse``: reading it as ``check`` does (``manifests.parse``: yaml-rs where YAML 1.1 and 1.2
  agree, the exact reader (kubectl's reading) elsewhere; see ``yaml11.py``);
* ``check``: the full CLI path, ``main(["check", FILE, "-o", "json"])``: parse, schema, rules,
  line lookup, report, in this process (imports and the compiled schema already loaded);
* ``check-cli``: the same as users run it, ``python -m dask_gpu_parity.cli check FILE -o json``
  in a fresh process, start-up included, like kubeconform below;
* ``kubeconform``: the reference the throughput target cites, kubeconform validating the same
  file against the same DaskCluster schema (converted to JSON Schema as its own script does) on one
  goroutine with ``GOMAXPROCS=1``: schema validation alone, no policy, no line lookup. Run when
  ``--kubeconform`` or ``$KUBECONFORM`` names the binary (``make bench`` builds a pinned one).

Reports, per stage, the medians of the repeats in wall-clock and in CPU time (this process's, or
the child's for the last two; the machine is shared: CPU time is what one dedicated core would
take), documents per second by each, how many documents took the fast path, and the peak RSS.
Pinned to one core where the OS allows it; the children inherit the pinning.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import yaml

from dask_gpu_parity.cli import main
from dask_gpu_parity.manifests import Source, parse, yaml11

ROOT = Path(__file__).resolve().parents[1]


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


def kubeconform_schemas(folder: Path) -> str:
    """Write the bundled DaskCluster schema where kubeconform looks; return its location flag.

    Converted as kubeconform's ``scripts/openapi2jsonschema.py`` converts a CRD: every object
    below the root that lists ``properties`` gets ``additionalProperties: false``, and a
    ``format: int-or-string`` node becomes a choice of string or integer.
    """

    def convert(node: object, root: bool = False) -> object:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        if node.get("format") == "int-or-string":
            return {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        out = {key: convert(value) for key, value in node.items()}
        if "properties" in out and not root:
            out.setdefault("additionalProperties", False)
        return out

    bundled = resources.files("dask_gpu_parity.core").joinpath("data/dask_crds.json")
    schema = json.loads(bundled.read_text("utf-8"))["schemas"]["DaskCluster"]
    target = folder / "kubernetes.dask.org" / "daskcluster_v1.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(convert(schema, root=True)))
    return str(folder / "{{.Group}}" / "{{.ResourceKind}}_{{.ResourceAPIVersion}}.json")


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall-clock and CPU seconds of a command on this core, start-up included; its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, f"exit {done.returncode}: {done.stdout[-300:]}"


def run_kubeconform(binary: str, location: str, path: Path, count: int) -> tuple[float, float]:
    """kubeconform on one goroutine; every document must come out valid."""
    argv = [binary, "-n", "1", "-summary", "-schema-location", location, str(path)]
    wall, cpu, out = run_child(argv, {"GOMAXPROCS": "1"})
    if not out.startswith("exit 0:") or f"Valid: {count}," not in out:
        raise SystemExit(f"kubeconform did not validate every document: {out}")
    return wall, cpu


def run_cli(path: Path, count: int) -> tuple[float, float]:
    """``dask-gpu-parity check`` as users run it: a fresh process, start-up included."""
    argv = [sys.executable, "-m", "dask_gpu_parity.cli", "check", str(path), "-o", "json"]
    wall, cpu, out = run_child(argv, {})
    if not out.startswith("exit 1:") or f'"resources": {count},' not in out:
        raise SystemExit(f"dask-gpu-parity check did not check every document: {out}")
    return wall, cpu


def run_once(path: Path, stage: str) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of ``stage`` in this process."""
    wall, cpu = time.perf_counter(), time.process_time()
    if stage == "pyyaml":
        for _ in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader):
            pass
    elif stage == "parse":
        parse(Source(str(path), path.read_text()))
    else:
        code = main(["check", str(path), "-o", "json"], out=io.StringIO(), err=io.StringIO())
        assert code == 1, code
    return time.perf_counter() - wall, time.process_time() - cpu


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--kubeconform",
        default=os.environ.get("KUBECONFORM"),
        help="kubeconform binary to time beside check (default: $KUBECONFORM; skipped if unset)",
    )
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.yaml"
        path.write_text(corpus(args.documents))
        size = path.stat().st_size
        pieces = yaml11.split(path.read_text()) or []
        fast = sum(piece.fast for piece in pieces)
        stages: tuple[str, ...] = ("pyyaml", "parse", "check", "check-cli")
        location = ""
        if args.kubeconform:
            stages += ("kubeconform",)
            location = kubeconform_schemas(Path(tmp) / "schemas")
        times: dict[str, list[tuple[float, float]]] = {stage: [] for stage in stages}
        run_once(path, "check")  # warm-up: imports, schema load
        for _ in range(args.repeat):
            for stage in stages:
                if stage == "kubeconform":
                    times[stage].append(
                        run_kubeconform(args.kubeconform, location, path, args.documents)
                    )
                elif stage == "check-cli":
                    times[stage].append(run_cli(path, args.documents))
                else:
                    times[stage].append(run_once(path, stage))
    wall = {s: statistics.median(t[0] for t in times[s]) for s in stages}
    cpu = {s: statistics.median(t[1] for t in times[s]) for s in stages}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"corpus: {args.documents} DaskCluster documents, {size / 2**20:.1f} MiB, one core")
    print(f"fast path: {fast} of {len(pieces)} documents")
    print(f"load average before: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f}")
    print(f"{'stage':<12}{'wall s':>8}{'docs/s':>9}{'cpu s':>8}{'docs/s':>9}   wall runs")
    for stage in stages:
        runs = " ".join(f"{t[0]:.2f}" for t in times[stage])
        n = args.documents
        print(
            f"{stage:<12}{wall[stage]:>8.2f}{n / wall[stage]:>9.0f}"
            f"{cpu[stage]:>8.2f}{n / cpu[stage]:>9.0f}   {runs}"
        )
    print(f"check/parse ratio (cpu): {cpu['check'] / cpu['parse']:.2f}")
    if "kubeconform" in cpu:
        ratio = cpu["check-cli"] / cpu["kubeconform"]
        print(f"check-cli/kubeconform ratio (cpu, both fresh processes): {ratio:.2f}")
    print(f"peak RSS: {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
