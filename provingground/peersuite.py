"""dask-kubernetes' own operator tests, from its sdist, on the proving ground: with and without us.

``python -m provingground.peersuite`` starts a ground with the real node and no kwok CPU pool
(their Pods have no nodeSelector: an untainted kwok node would take them and never run them),
installs the Dask CRDs, tags the built Dask image ``dask-kubernetes:dev`` on the node, and runs
``dask_kubernetes/operator/controller/tests`` and ``operator/kubecluster/tests`` (copied from the
sdist into the run folder, never into the repository) with ``peer_conftest.py`` in place of their
kind/docker conftest. Then it installs our chart and runs them again, and prints both results
side by side (a Markdown table for docs/proving-ground.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .binaries import find_binaries
from .dask_operator import install_crds
from .daskchart import dask_kubernetes_sdist
from .install import Helm, install_parity, uninstall
from .realnode import built_images, real_node_ground, real_node_name

__all__ = ["SUITES", "compare", "main", "outcomes", "prepare", "run_suite", "webhook_calls"]

REPO = Path(__file__).resolve().parents[1]
SUITES = ("dask_kubernetes/operator/controller/tests", "dask_kubernetes/operator/kubecluster/tests")
_INI = """[pytest]
addopts = -p no:cacheprovider --import-mode=importlib -rA
timeout = 300
"""


def prepare(dest: Path) -> Path:
    """Copy their test folders next to a conftest that imports ``peer_conftest``; return dest."""
    sdist = dask_kubernetes_sdist()
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for suite in SUITES:
        shutil.copytree(sdist / suite, dest / suite.split("/")[-2])
    (dest / "conftest.py").write_text(
        "from provingground.peer_conftest import *  # noqa: F403  # their fixtures, our ground\n"
    )
    (dest / "pytest.ini").write_text(_INI)
    return dest


def run_suite(
    suite: Path, kubeconfig: Path, kubectl: Path, junit: Path, extra: Sequence[str] = ()
) -> int:
    """Run their tests against ``kubeconfig`` (``extra``: pytest arguments); JUnit to ``junit``."""
    env = {
        "DGP_PEER_KUBECONFIG": str(kubeconfig),
        "DGP_PEER_KUBECTL": str(kubectl),
        "KUBECONFIG": str(kubeconfig),
        "PYTHONPATH": f"{REPO}:{REPO / 'operator'}",
    }
    argv = [sys.executable, "-m", "pytest", str(suite), "-c", str(suite / "pytest.ini")]
    argv += ["--rootdir", str(suite), f"--junitxml={junit}", *extra]
    return subprocess.run(argv, env={**os.environ, **env}, check=False, timeout=3600).returncode


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed, failed, error or skipped (with the first line of the reason)."""
    found: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                message = (element.get("message") or "").splitlines()[:1]
                outcome = {"failure": "failed"}.get(tag, tag) + (
                    f": {message[0][:120]}" if message else ""
                )
                break
        found[name] = outcome
    return found


def compare(without: Mapping[str, str], with_us: Mapping[str, str]) -> str:
    """A Markdown table: each test's outcome without and with us, differences marked."""
    lines = [
        "| test | without dask-gpu-parity | with dask-gpu-parity | same |",
        "| --- | --- | --- | --- |",
    ]
    for name in sorted(set(without) | set(with_us)):
        a, b = without.get(name, "not run"), with_us.get(name, "not run")
        lines.append(f"| `{name}` | {a} | {b} | {'yes' if a == b else '**no**'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Both runs on one ground: first without our chart, then with it; print the table."""
    parser = argparse.ArgumentParser(prog="python -m provingground.peersuite")
    parser.add_argument("--run-dir", type=Path, default=REPO / ".run" / "peersuite")
    args = parser.parse_args(argv)
    bins = find_binaries()
    images = built_images()
    suite = prepare(args.run_dir / "suite")
    results: dict[str, dict[str, str]] = {}
    with real_node_ground(args.run_dir / "ground", bins, images, sizes={"cpu": 0}) as ground:
        cp = ground.control_plane
        node = getattr(ground, "real_node")  # noqa: B009  # the node harness of this tree
        node.ctr("images", "tag", images.dask, "docker.io/library/dask-kubernetes:dev")
        install_crds(cp.kubectl)
        helm = Helm(bins.helm, args.run_dir / "helm", cp.kubeconfig)
        for label in ("without", "with"):
            if label == "with":
                install_parity(helm, cp.kubectl, real_node_name(ground))
            junit = args.run_dir / f"junit-{label}.xml"
            run_suite(suite, cp.kubeconfig, bins.kubectl, junit)
            results[label] = outcomes(junit)
        calls = webhook_calls(cp.kubectl)
        uninstall(helm)
    print(compare(results["without"], results["with"]))
    print("\nThe API server's admission counters for our webhooks during the run with them:")
    print("\n".join(calls) or "(none)")
    return 0


def webhook_calls(kubectl: Callable[..., subprocess.CompletedProcess[str]]) -> list[str]:
    """The API server's counters of calls to, and match-condition skips of, our webhooks."""
    metrics = kubectl("get", "--raw", "/metrics").stdout.splitlines()
    names = ("apiserver_admission_webhook_request_total", "apiserver_admission_match_condition")
    return [m for m in metrics if m.startswith(names) and "gpuparity.dask.org" in m]


if __name__ == "__main__":
    sys.exit(main())
