"""Throughput of `dask-gpu-parity check` over a generated corpus of DaskCluster manifests.

Usage, from the repository root:
    python -m benchmarks.check_throughput [--documents 10000] [--repeat 5] [--kubeconform BIN]
        [--before TREE] [--distinct] [--json FILE]

Writes the corpus (one multi-document file, a realistic mix: GPU over TCP and UCX, CPU-only) to a
temporary folder, then times, side by side in one process, in interleaved rounds (every stage once
a round; each round starts one stage later than the last):

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

* ``jsonschema`` and ``fastjsonschema``: Python peers of kubeconform,
  ``benchmarks/jsonschema_peer.py`` in a fresh process: PyYAML's libyaml loader and that package
  validating every document against the same converted schema: schema validation alone, as a
  Python tool does it (the reference validator, and the one compiled to Python code).

* ``--distinct``: a corpus whose documents all differ in what the rules read (each cluster its
  own worker count), not only in their names as a fleet stamped from templates does: ``check``
  evaluates each distinct content once and walks each distinct text once for its lines, so the
  templated corpus is its best case and this one its worst (nothing shared).

* ``check-cli-before``: with ``--before TREE``, ``check-cli`` of another source tree (a worktree
  of an earlier commit: its ``operator/`` first on ``PYTHONPATH``), so a change is measured
  beside what it changes, in the same rounds.

Reports, per stage, the median of the rounds in wall-clock and in CPU time (this process's, or
the child's for the stages run in a fresh process; the machine is shared: CPU time is what one
dedicated core would take) with the CPU time's spread (fastest and slowest round), documents per
second by each, how many documents took the fast path, and the peak RSS; with kubeconform,
``check-cli``'s documents per CPU-second over kubeconform's, round by round (median and range:
one round's ratio is not a result), and the Python peers' beside both. ``--json`` also writes
every figure and every round to a file. Pinned to one core where the OS allows it; the children
inherit the pinning.
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
from typing import Any

import yaml

from dask_gpu_parity.cli import main
from dask_gpu_parity.manifests import Source, parse, yaml11

ROOT = Path(__file__).resolve().parents[1]


def corpus(count: int, *, distinct: bool = False) -> str:
    """``count`` DaskCluster documents as users write them: GPU over TCP and UCX, CPU-only.

    They differ in their names; with ``distinct``, in their worker counts too (no two alike).
    """
    tcp = yaml.safe_load((ROOT / "examples" / "gpu-cluster-tcp.yaml").read_text())
    ucx = yaml.safe_load((ROOT / "examples" / "gpu-cluster-ucx.yaml").read_text())
    cpu = yaml.safe_load((ROOT / "examples" / "cpu-cluster.yaml").read_text())
    templates = [tcp, tcp, ucx, cpu]
    docs = []
    for index in range(count):
        doc = copy.deepcopy(templates[index % len(templates)])
        doc["metadata"] = {"name": f"cluster-{index}", "namespace": f"team-{index % 50}"}
        if distinct:
            doc["spec"]["worker"]["replicas"] = 1 + index
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


PEERS = ("jsonschema", "fastjsonschema")  # the Python peers, jsonschema_peer.py's validators


def run_peer(kind: str, schema: Path, path: Path, count: int) -> tuple[float, float]:
    """A Python peer (``jsonschema_peer.py``); every document must come out valid."""
    script = ROOT / "benchmarks" / "jsonschema_peer.py"
    wall, cpu, out = run_child([sys.executable, str(script), kind, str(schema), str(path)], {})
    if not out.startswith("exit 0:") or f"Valid: {count}," not in out:
        raise SystemExit(f"the {kind} peer did not validate every document: {out}")
    return wall, cpu


def run_cli(path: Path, count: int, tree: Path | None = None) -> tuple[float, float]:
    """``dask-gpu-parity check`` as users run it: a fresh process, start-up included.

    ``tree``: another source tree whose code runs instead (``--before``).
    """
    argv = [sys.executable, "-m", "dask_gpu_parity.cli", "check", str(path), "-o", "json"]
    env = {} if tree is None else {"PYTHONPATH": str(tree / "operator")}
    wall, cpu, out = run_child(argv, env)
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


def measure(
    path: Path,
    stages: tuple[str, ...],
    rounds: int,
    *,
    count: int,
    binary: str,
    location: str,
    schema: Path,
    before: Path | None = None,
) -> list[dict[str, tuple[float, float]]]:
    """``rounds`` rounds of every stage, interleaved, each round starting one stage later.

    Rotating the order spreads what the machine's other work does over all stages alike.
    """
    results = []
    for index in range(rounds):
        shift = index % len(stages)
        order = stages[shift:] + stages[:shift]
        times: dict[str, tuple[float, float]] = {}
        for stage in order:
            if stage == "kubeconform":
                times[stage] = run_kubeconform(binary, location, path, count)
            elif stage == "check-cli":
                times[stage] = run_cli(path, count)
            elif stage in PEERS:
                times[stage] = run_peer(stage, schema, path, count)
            elif stage == "check-cli-before":
                times[stage] = run_cli(path, count, before)
            else:
                times[stage] = run_once(path, stage)
        results.append(times)
    return results


def summarise(
    rounds: list[dict[str, tuple[float, float]]], count: int
) -> dict[str, dict[str, float]]:
    """Per stage: the median and the spread of the rounds, in seconds and in documents/s."""
    out: dict[str, dict[str, float]] = {}
    for stage in rounds[0]:
        wall = [r[stage][0] for r in rounds]
        cpu = [r[stage][1] for r in rounds]
        out[stage] = {
            "wall_s_median": statistics.median(wall),
            "cpu_s_median": statistics.median(cpu),
            "cpu_s_min": min(cpu),
            "cpu_s_max": max(cpu),
            "docs_per_wall_s": count / statistics.median(wall),
            "docs_per_cpu_s": count / statistics.median(cpu),
        }
    return out


def versus(
    rounds: list[dict[str, tuple[float, float]]], baseline: str, stage: str = "check-cli"
) -> dict[str, float]:
    """``stage``'s documents per CPU-second over ``baseline``'s, round by round."""
    ratios = [r[baseline][1] / r[stage][1] for r in rounds]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def main_(argv: list[str] | None = None) -> int:
    """Write the corpus, time every stage in interleaved rounds, print (and save) the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument(
        "--kubeconform",
        default=os.environ.get("KUBECONFORM") or None,
        help="kubeconform binary to time beside check (default: $KUBECONFORM; skipped if unset)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="a source tree (e.g. a worktree of an earlier commit) whose check-cli runs beside",
    )
    parser.add_argument(
        "--distinct",
        action="store_true",
        help="documents that all differ in what the rules read (no two evaluations shared)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.documents < 1 or args.repeat < 1:
        parser.error("--documents and --repeat take a whole number from 1")
    if args.kubeconform and not os.access(args.kubeconform, os.X_OK):
        parser.error(f"--kubeconform {args.kubeconform}: no such executable")
    if args.before and not (args.before / "operator" / "dask_gpu_parity").is_dir():
        parser.error(f"--before {args.before}: no operator/dask_gpu_parity there")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.yaml"
        path.write_text(corpus(args.documents, distinct=args.distinct))
        size = path.stat().st_size
        pieces = yaml11.split(path.read_text()) or []
        stages: tuple[str, ...] = ("pyyaml", "parse", "check", "check-cli", *PEERS)
        if args.before:
            stages += ("check-cli-before",)
        location = kubeconform_schemas(Path(tmp) / "schemas")
        schema = Path(tmp) / "schemas" / "kubernetes.dask.org" / "daskcluster_v1.json"
        if args.kubeconform:
            stages += ("kubeconform",)
        run_once(path, "check")  # warm-up: imports, schema load
        rounds = measure(
            path,
            stages,
            args.repeat,
            count=args.documents,
            binary=args.kubeconform or "",
            location=location,
            schema=schema,
            before=args.before,
        )
    result: dict[str, Any] = {
        "documents": args.documents,
        "corpus": "distinct" if args.distinct else "templated",
        "corpus_bytes": size,
        "fast_path": sum(piece.fast for piece in pieces),
        "rounds": args.repeat,
        "load_average": [load[0], os.getloadavg()[0]],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "stages": summarise(rounds, args.documents),
        "runs": [{s: {"wall_s": t[0], "cpu_s": t[1]} for s, t in r.items()} for r in rounds],
    }
    for peer in PEERS:
        result[f"check_cli_vs_{peer}"] = versus(rounds, peer)
    if args.kubeconform:
        result["check_cli_vs_kubeconform"] = versus(rounds, "kubeconform")
        for peer in PEERS:
            result[f"{peer}_vs_kubeconform"] = versus(rounds, "kubeconform", peer)
    if args.before:
        result["check_cli_vs_before"] = versus(rounds, "check-cli-before")
        if args.kubeconform:
            result["check_cli_before_vs_kubeconform"] = versus(
                rounds, "kubeconform", "check-cli-before"
            )
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def report(result: dict[str, Any]) -> None:
    """The figures as a table: medians of the rounds, the CPU spread beside them."""
    n = result["documents"]
    print(
        f"corpus: {n} DaskCluster documents ({result['corpus']}), "
        f"{result['corpus_bytes'] / 2**20:.1f} MiB, one core"
    )
    print(f"fast path: {result['fast_path']} of {n} documents; {result['rounds']} rounds")
    load = result["load_average"]
    print(f"load average before: {load[0]:.2f}, after: {load[1]:.2f}")
    print(f"{'stage':<12}{'wall s':>8}{'docs/s':>9}{'cpu s':>8}{'docs/s':>9}   cpu s min-max")
    for stage, s in result["stages"].items():
        print(
            f"{stage:<12}{s['wall_s_median']:>8.2f}{s['docs_per_wall_s']:>9.0f}"
            f"{s['cpu_s_median']:>8.2f}{s['docs_per_cpu_s']:>9.0f}"
            f"   {s['cpu_s_min']:.2f}-{s['cpu_s_max']:.2f}"
        )
    if "check_cli_vs_kubeconform" in result:
        r = result["check_cli_vs_kubeconform"]
        print(
            "check-cli documents per CPU-second over kubeconform's (both fresh processes), "
            f"round by round: median {r['median']:.2f}, range {r['min']:.2f}-{r['max']:.2f}"
        )
    for key, words in (
        *((f"check_cli_vs_{peer}", f"check-cli over the {peer} peer's") for peer in PEERS),
        *((f"{peer}_vs_kubeconform", f"the {peer} peer over kubeconform's") for peer in PEERS),
        ("check_cli_before_vs_kubeconform", "check-cli-before over kubeconform's"),
        ("check_cli_vs_before", "check-cli over check-cli-before's"),
    ):
        if key in result:
            r = result[key]
            print(
                f"{words}, round by round: median {r['median']:.2f}, "
                f"range {r['min']:.2f}-{r['max']:.2f}"
            )
    print(f"peak RSS: {result['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    sys.exit(main_())
