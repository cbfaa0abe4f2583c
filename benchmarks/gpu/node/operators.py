"""The two operators on the GPU node's host, and the flow through them (``node.py --operators``).

Standard library only, like ``node.py``: the packages the operators need come as one archive
(``provingground/node/operator_site.sh``), unpacked beside the Dask wheels into a folder on
``PYTHONPATH``; ``dask_gpu_parity`` itself runs from this checkout's ``operator/``.

- the dask operator: ``kopf run -m dask_kubernetes.operator.controller``, as dask-kubernetes'
  chart runs it, against the node's API server;
- ``dask-gpu-parity run`` with its webhooks (``failurePolicy: Fail``) and the drift watch, a
  DaskGPUPolicy naming the probe image made on this machine (the verifier by reference, the
  default: ``gpu-parity-probe`` copies ``probe.py`` into the pod);
- then ``kubectl apply`` of the RAPIDS DaskCluster whose scheduler has no GPU: the webhook
  mutates it, the dask operator makes the scheduler Deployment, the Pod runs ``gpu-parity-check``
  on the GPU the device plugin gives it, the scheduler starts; and the same cluster with
  ``CUDA_VISIBLE_DEVICES=""``, whose probe fails: its reason in the Pod's termination message
  and, posted by our operator, in its events.
"""

from __future__ import annotations

import json
import time
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
WEBHOOK_PORT, METRICS_PORT, HEALTH_PORT, DASK_HEALTH_PORT = 18443, 18081, 18082, 18083
PROBE_IMAGE = "localhost/gpunode/dask-gpu-parity-probe:local"
CLUSTER_CRDS = ("daskclusters.kubernetes.dask.org", "daskgpupolicies.gpuparity.dask.org")


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200 (plain HTTP on loopback)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # loopback
            return bool(response.status == 200)
    except OSError:
        return False


class Operators:
    """Installs, starts and drives the dask operator and ``dask-gpu-parity run``."""

    def __init__(
        self, node: Any, site_archive: Path, sh: Callable[..., str], wait: Callable[..., Any]
    ) -> None:
        self.node = node
        self.sh, self.wait = sh, wait  # node.py's helpers
        self.site_archive = site_archive
        self.site = node.root / "site"
        self.ops = node.payload / "operator"
        self.result: dict[str, Any] = node.summary.setdefault("operators", {})

    def install(self) -> None:
        """Unpack the packages (the archive, then the Dask wheels) into one folder."""
        sh = self.sh
        t = time.monotonic()
        self.site.mkdir(exist_ok=True)
        sh(["tar", "-xJf", str(self.site_archive), "-C", str(self.site)], check=True, timeout=300)
        for wheel in sorted(self.node.args.wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(self.site)
        self.node.env["PYTHONPATH"] = f"{REPO / 'operator'}:{self.site}"
        self.node.env["KUBECONFIG"] = str(self.node.payload / "admin.kubeconfig")
        self.node.env["PYTHONWARNINGS"] = "ignore"
        self.result["install_s"] = round(time.monotonic() - t, 2)
        versions = sh(
            [
                self.node.args.python,
                "-c",
                "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
                "('kopf', 'dask-kubernetes', 'dask', 'distributed', 'kubernetes', 'aiohttp')}))",
            ],
            env=self.node.env,
            check=True,
        )
        line = next(x for x in versions.splitlines() if x.startswith("{"))
        self.result["versions"] = json.loads(line)
        self.node.log("operator packages:", self.result["versions"])
        # Server-side: the DaskCluster CRD exceeds the client-side annotation limit.
        self.node.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", str(self.ops / "crds"), check=True
        )

        def established(crd: str) -> bool:
            out = self.node.kubectl("get", "crd", crd, "-o", "json")
            conditions = json.loads(out).get("status", {}).get("conditions", []) if out else []
            return any(
                c.get("type") == "Established" and c.get("status") == "True" for c in conditions
            )

        for crd in CLUSTER_CRDS:
            self.wait(f"CRD {crd} Established", lambda c=crd: established(c), 60, self.node.log)

    def start(self) -> None:
        """The dask operator, then ours; our webhooks and policy once it is ready."""
        wait = self.wait
        python = self.node.args.python
        t = time.monotonic()
        self.node.start(
            "dask-operator",
            [
                python,
                "-m",
                "kopf",
                "run",
                "-m",
                "dask_kubernetes.operator.controller",
                "--all-namespaces",
                "--standalone",
                f"--liveness=http://127.0.0.1:{DASK_HEALTH_PORT}/healthz",
                "--verbose",
            ],
        )
        pki = self.node.pki
        self.node.start(
            "dask-gpu-parity",
            [
                python,
                "-m",
                "dask_gpu_parity.cli",
                "run",
                "--tls-cert",
                str(pki / "webhook.crt"),
                "--tls-key",
                str(pki / "webhook.key"),
                "--address",
                "127.0.0.1",
                "--port",
                str(WEBHOOK_PORT),
                "--metrics-port",
                str(METRICS_PORT),
                "--health-port",
                str(HEALTH_PORT),
            ],
        )
        wait(
            "dask operator /healthz",
            lambda: (
                self.node.alive("dask-operator")
                and http_ok(f"http://127.0.0.1:{DASK_HEALTH_PORT}/healthz")
            ),
            90,
            self.node.log,
            0.25,
        )
        self.result["dask_operator_ready_s"] = round(time.monotonic() - t, 2)
        wait(
            "dask-gpu-parity /readyz",
            lambda: (
                self.node.alive("dask-gpu-parity")
                and http_ok(f"http://127.0.0.1:{METRICS_PORT}/readyz")
            ),
            90,
            self.node.log,
            0.25,
        )
        self.result["parity_ready_s"] = round(time.monotonic() - t, 2)
        self.node.log(self.node.kubectl("apply", "-f", str(self.ops / "webhooks.yaml"), check=True))
        self.node.log(self.node.kubectl("apply", "-f", str(self.ops / "policy.yaml"), check=True))
        cluster = str(self.node.payload / "manifests" / "daskcluster-pass.yaml")

        def policy_applies() -> bool:  # the webhook answers with the policy's probe image
            out = self.node.kubectl("create", "--dry-run=server", "-o", "json", "-f", cluster)
            return PROBE_IMAGE in out

        wait("the policy in force (server dry-run)", policy_applies, 60, self.node.log, 0.5)
        self.result["webhooks_in_force_s"] = round(time.monotonic() - t, 2)

    def case(self, name: str, manifest: Path, expect_pass: bool) -> dict[str, Any]:
        """``kubectl apply`` one DaskCluster and follow its scheduler Pod."""
        doc = json.loads(
            self.node.kubectl(
                "create", "--dry-run=client", "-o", "json", "-f", str(manifest), check=True
            )
        )
        cluster = doc["metadata"]["name"]
        self.node.log(f"== {name}: kubectl apply -f {manifest.name} (DaskCluster {cluster})")
        t_apply = time.monotonic()
        applied = self.node.kubectl("apply", "-f", str(manifest), check=True)
        self.node.log(applied)
        stored = json.loads(
            self.node.kubectl(
                "get",
                "daskcluster",
                "-n",
                doc["metadata"]["namespace"],
                cluster,
                "-o",
                "json",
                check=True,
            )
        )
        result: dict[str, Any] = self.node.follow(name, cluster, manifest.name, t_apply)
        scheduler = stored["spec"]["scheduler"]["spec"]
        result["admission"] = {
            "kubectl_apply": applied,
            "annotations": stored["metadata"].get("annotations", {}),
            "scheduler_init_containers": [
                {k: c.get(k) for k in ("name", "image", "command", "resources")}
                for c in scheduler.get("initContainers", [])
            ],
            "scheduler_resources": [c.get("resources") for c in scheduler["containers"]],
            "node_selector": scheduler.get("nodeSelector"),
            "tolerations": scheduler.get("tolerations"),
        }
        result["expect_pass"] = expect_pass
        result["all_events"] = self.node.kubectl(
            "get",
            "events",
            "-n",
            doc["metadata"]["namespace"],
            "--sort-by=.lastTimestamp",
            "-o",
            "wide",
        )
        self.node.log(f"-- {name} all events:\n{result['all_events']}")
        return result

    def flow(self) -> None:
        """Both DaskClusters in turn (a failing pod keeps its GPU while it backs off)."""
        wait = self.wait
        man = self.node.payload / "manifests"
        cases: dict[str, Any] = {}
        self.result.setdefault("rounds", []).append(cases)
        for name, expect in (("pass", True), ("fail", False)):
            path = man / f"daskcluster-{name}.yaml"
            cases[name] = self.case(f"operator-{name}", path, expect)
            self.node.kubectl("delete", "-f", str(path), "--wait=true", timeout=120)
            cluster = "rapids-tcp" if name == "pass" else "rapids-tcp-nogpu"
            wait(  # the scheduler's and the worker's: the next round needs both GPUs
                f"{cluster} pods gone",
                lambda c=cluster: not self.node.pods(c, component=None),
                120,
                self.node.log,
                0.25,
            )

    def report(self) -> None:
        """The operators' metrics and log tails."""
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        self.result["metrics"] = [
            line for line in metrics.splitlines() if line.startswith("dgp_") and " 0.0" not in line
        ]
        for proc in ("dask-gpu-parity", "dask-operator"):
            log = (self.node.logs / f"{proc}.log").read_text(errors="replace")
            self.result[f"{proc}_log_tail"] = log[-6000:]


def run(
    node: Any,
    site_archive: Path,
    sh: Callable[..., str],
    wait: Callable[..., Any],
    rounds: int = 1,
) -> None:
    """What ``node.py --operators`` runs once the node is up."""
    ops = Operators(node, site_archive, sh, wait)
    ops.install()
    ops.start()
    for _ in range(rounds):
        ops.flow()
    ops.report()
