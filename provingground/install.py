"""``helm install`` of both operators onto the proving ground, from the built images.

What a platform engineer runs, in the same order:

1. the dask-kubernetes operator from its own chart (``provingground/daskchart.py``: the sdist's
   chart, its CRDs included) into namespace ``dask-operator``, its image the catalog's, pull
   policy IfNotPresent;
2. dask-gpu-parity from ``charts/dask-gpu-parity`` with its defaults (the images it names are
   the ones ``make images`` built) into namespace ``dgp-system``, labelled for the restricted Pod
   Security Standard: self-signed TLS, webhooks through the chart's Service, readiness probes,
   the PDB, the drift-watch replica.

Both get one value beyond their defaults: a ``nodeSelector`` that pins their Pods to the node
that runs containers (on a production cluster: the system pool, e.g.
``nodeSelector: {node-pool: system}`` plus that pool's ``tolerations``).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .daskchart import operator_chart
from .process import Tool, helm_env

__all__ = [
    "DASK_OPERATOR_NAMESPACE",
    "DASK_OPERATOR_RELEASE",
    "NAMESPACE",
    "RELEASE",
    "RESTRICTED",
    "Helm",
    "InstallError",
    "Installed",
    "ensure_namespace",
    "install",
    "install_dask_operator",
    "install_parity",
    "split_reference",
    "uninstall",
]

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "dask-gpu-parity"
RELEASE = "dask-gpu-parity"
NAMESPACE = "dgp-system"
DASK_OPERATOR_RELEASE = "dask-kubernetes-operator"
DASK_OPERATOR_NAMESPACE = "dask-operator"
RESTRICTED = {
    f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")
}
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


class InstallError(RuntimeError):
    """A helm or kubectl step of the install failed; the message says which and why."""


class Helm:
    """The proving-ground helm binary with a private home (no repositories, no user config)."""

    def __init__(self, binary: Path, home: Path, kubeconfig: Path) -> None:
        self.tool = Tool([binary], helm_env(home, kubeconfig), error=InstallError, shown=2)

    def run(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        """Run helm; return its stdout, raise ``InstallError`` with its stderr on failure."""
        return self.tool.run(*args, check=check, timeout=timeout).stdout


def split_reference(reference: str) -> tuple[str, str]:
    """``registry/path:tag`` -> (``registry/path``, ``tag``); a port's colon is not a tag's."""
    name, sep, tag = reference.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError(f"Image reference {reference!r} has no tag")
    return name, tag


def _sets(values: Mapping[str, str]) -> list[str]:
    args: list[str] = []
    for key, value in values.items():
        args += ["--set-string", f"{key}={value}"]
    return args


def _node_selector(node: str) -> dict[str, str]:
    return {"nodeSelector.kubernetes\\.io/hostname": node}


def ensure_namespace(kubectl: Kubectl, name: str, labels: Mapping[str, str] | None = None) -> None:
    """Create namespace ``name`` unless it exists; set ``labels`` on it (overwriting)."""
    if kubectl("get", "namespace", name, check=False).returncode != 0:
        kubectl("create", "namespace", name)
    if labels:
        kubectl("label", "namespace", name, "--overwrite", *(f"{k}={v}" for k, v in labels.items()))


def install_dask_operator(
    helm: Helm, kubectl: Kubectl, image: str, node: str, *, timeout: str = "5m"
) -> str:
    """``helm install`` the dask-kubernetes operator chart from its sdist; return helm's output.

    The image is the one built for the proving ground (the chart's default repository, with the
    release's tag: the sdist's chart says ``set-by-chartpress``), pulled only if not present.
    """
    name, tag = split_reference(image)
    ensure_namespace(kubectl, DASK_OPERATOR_NAMESPACE)
    values = {
        "image.name": name,
        "image.tag": tag,
        "image.pullPolicy": "IfNotPresent",
        **_node_selector(node),
    }
    return helm.run(
        "install",
        DASK_OPERATOR_RELEASE,
        str(operator_chart()),
        "--namespace",
        DASK_OPERATOR_NAMESPACE,
        *_sets(values),
        "--wait",
        f"--timeout={timeout}",
    )


def chart_images(helm: Helm) -> dict[str, str]:
    """The operator and probe image references the chart's defaults name (``helm template``)."""
    out = helm.run("template", RELEASE, str(CHART), "--namespace", NAMESPACE)
    images: dict[str, str] = {}
    for doc in out.split("\n---"):
        if "kind: Deployment" in doc:
            line = next(x for x in doc.splitlines() if x.strip().startswith("image: "))
            images["operator"] = line.split("image: ", 1)[1].strip().strip('"')
        if "kind: DaskGPUPolicy" in doc:
            line = next(x for x in doc.splitlines() if x.strip().startswith("image: "))
            images["probe"] = line.split("image: ", 1)[1].strip().strip('"')
    return images


def install_parity(
    helm: Helm,
    kubectl: Kubectl,
    node: str,
    *,
    extra: Mapping[str, str] | None = None,
    timeout: str = "5m",
) -> str:
    """``helm install`` charts/dask-gpu-parity with its defaults; return helm's output.

    The release namespace enforces the restricted Pod Security Standard, so the API server itself
    refuses any Pod of the chart that breaks it. ``--wait`` returns once both Deployments are
    Ready: the webhook Pods' readiness probe is the webhook port answering.
    """
    ensure_namespace(kubectl, NAMESPACE, RESTRICTED)
    return helm.run(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        *_sets({**_node_selector(node), **(extra or {})}),
        "--wait",
        f"--timeout={timeout}",
    )


def _endpoints_ready(kubectl: Kubectl, replicas: int) -> bool:
    out = kubectl(
        "get",
        "endpointslices",
        "-n",
        NAMESPACE,
        "-l",
        f"kubernetes.io/service-name={RELEASE}",
        "-o",
        "json",
    ).stdout
    ready = [
        e
        for s in json.loads(out)["items"]
        for e in s.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready")
    ]
    return len(ready) >= replicas


# A GPU DaskCluster the webhooks' match conditions let through: created with --dry-run=server,
# it makes the API server call the mutating and validating webhooks through the Service.
_PROBE_CLUSTER = {
    "apiVersion": "kubernetes.dask.org/v1",
    "kind": "DaskCluster",
    "metadata": {"name": "webhook-probe", "namespace": "default"},
    "spec": {
        "worker": {
            "replicas": 1,
            "spec": {
                "containers": [
                    {
                        "name": "worker",
                        "image": "nvcr.io/nvidia/rapidsai/base:25.12-cuda12.8-py3.12",
                        "args": ["dask", "worker", "--name", "$(DASK_WORKER_NAME)"],
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ]
            },
        },
        "scheduler": {
            "spec": {
                "containers": [
                    {
                        "name": "scheduler",
                        "image": "nvcr.io/nvidia/rapidsai/base:25.12-cuda12.8-py3.12",
                        "args": ["dask", "scheduler"],
                    }
                ]
            },
            "service": {"ports": [{"name": "tcp-comm", "port": 8786}]},
        },
    },
}


def _webhook_unanswered(kubectl: Kubectl) -> str | None:
    """``None`` once the API server reaches our webhooks through the Service, else why not.

    Ready endpoints are not yet a route: kube-proxy writes a new Service's rules a moment
    later, and until then the API server's calls are refused. A server-side dry run makes the
    API server call the webhooks as a real create would; an answer (patched or denied) is one.
    """
    proc = kubectl(
        "create", "--dry-run=server", "-f", "-", "-o", "name",
        check=False, input=json.dumps(_PROBE_CLUSTER),
    )  # fmt: skip
    if proc.returncode == 0 or "denied the request" in proc.stderr:
        return None
    return proc.stderr.strip()[-300:] or f"kubectl exited {proc.returncode}"


@dataclass
class Installed:
    """What the install printed and how long each step took."""

    node: str
    outputs: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def install(
    helm: Helm,
    kubectl: Kubectl,
    dask_operator_image: str,
    node: str,
    *,
    expect_images: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> Installed:
    """Install both charts and wait until the webhook Service has every replica behind it.

    ``expect_images`` (``{"operator": ref, "probe": ref}``, from the image catalog) must be
    what the chart's defaults name: the install uses the defaults, so a catalog built for another
    version would leave Pods pulling images no one built.
    """
    done = Installed(node)
    if expect_images:
        named = chart_images(helm)
        wrong = {k: (v, named.get(k)) for k, v in expect_images.items() if named.get(k) != v}
        if wrong:
            raise InstallError(
                "The chart's default images are not the built ones: "
                + "; ".join(f"{k}: chart {c}, built {b}" for k, (b, c) in wrong.items())
            )
    t0 = time.monotonic()
    out = install_dask_operator(helm, kubectl, dask_operator_image, node)
    done.outputs["dask-operator"] = out
    done.timings["dask operator installed"] = time.monotonic() - t0
    t1 = time.monotonic()
    done.outputs["dask-gpu-parity"] = install_parity(helm, kubectl, node)
    deadline = time.monotonic() + timeout
    while not _endpoints_ready(kubectl, 2):
        if time.monotonic() > deadline:
            raise InstallError(f"The {RELEASE} Service has no 2 ready endpoints in {timeout:.0f}s")
        time.sleep(1)
    while (last := _webhook_unanswered(kubectl)) is not None:
        if time.monotonic() > deadline:
            raise InstallError(f"The API server cannot call the webhooks: {last}")
        time.sleep(1)
    done.timings["dask-gpu-parity installed"] = time.monotonic() - t1
    return done


def uninstall(helm: Helm, releases: Sequence[tuple[str, str]] | None = None) -> None:
    """``helm uninstall --wait`` our release, then the dask operator's (webhooks go first)."""
    for release, namespace in releases or (
        (RELEASE, NAMESPACE),
        (DASK_OPERATOR_RELEASE, DASK_OPERATOR_NAMESPACE),
    ):
        helm.run("uninstall", release, "--namespace", namespace, "--wait", check=False)


def pods_wide(kubectl: Kubectl) -> str:
    """``kubectl get pods -A -o wide``, as a user would look."""
    return kubectl("get", "pods", "-A", "-o", "wide").stdout.rstrip()


def pod_images(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    """Each Pod's node, phase, readiness, and its containers' image and imageID."""
    out = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)
    rows = []
    for pod in out["items"]:
        status = pod.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        rows.append(
            {
                "name": pod["metadata"]["name"],
                "node": pod["spec"].get("nodeName"),
                "phase": status.get("phase"),
                "ready": conditions.get("Ready") == "True",
                "containers": [
                    {"image": c.get("image"), "imageID": c.get("imageID")}
                    for c in status.get("containerStatuses") or []
                ],
            }
        )
    return rows
