"""Both operators as Pods from their images, installed by helm (``node.py --chart``).

Standard library only. ``chart_prep.py`` made the input on the build machine: both charts with
their values, the helm binary, Debian's iptables packages and the images ``make images`` built
from the Dockerfiles. The node runs kube-proxy (iptables mode) and CoreDNS as the CI node does
(``provingground/node/``); this machine has no netfilter tools, so ``netfilter_tools`` unpacks
the carried ones and puts wrappers on the node's ``PATH``. Pods reach the API server at the
``kubernetes`` ClusterIP, the API server reaches the webhooks at their Service's ClusterIP, and
the dask workers reach their scheduler at its Service's DNS name, all through kube-proxy.

Then the passing and the failing RAPIDS DaskCluster (``operators.py``) and the RAPIDS CuPy
example on a cluster whose scheduler the webhook mutated.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import operators  # type: ignore[import-not-found]  # beside this file (sys.path[0])

PARITY_NS, DASK_NS = "dgp-system", "dask-operator"
RESTRICTED = [f"pod-security.kubernetes.io/{m}=restricted" for m in ("enforce", "audit", "warn")]
PROBE = "ghcr.io/dask-gpu-parity/dask-gpu-parity-probe:0.1.0"
RELEASES = (  # release, chart folder (chart_prep.py), namespace; in install order
    ("dask-kubernetes-operator", "dask-kubernetes-operator", DASK_NS),
    ("dask-gpu-parity", "dask-gpu-parity", PARITY_NS),
)
# The names kube-proxy runs (iptables mode, IPv4 and IPv6), all in xtables-nft-multi.
XTABLES = [f"{f}{s}" for f in ("iptables", "ip6tables") for s in ("", "-save", "-restore")]


def netfilter_tools(debs: Path, root: Path, bin_dir: Path, sh: Callable[..., str]) -> str:
    """Unpack Debian's iptables packages into ``root``; wrappers in ``bin_dir``; its version.

    Each wrapper runs ``xtables-nft-multi`` (the nf_tables backend, Debian's default) with the
    packages' libraries and extensions, so nothing of the machine's own changes.
    """
    for deb in sorted(debs.glob("*.deb")):
        sh(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    lib = root / "usr/lib/x86_64-linux-gnu"
    multi = root / "usr/sbin/xtables-nft-multi"
    for name in XTABLES:
        wrapper = bin_dir / name
        wrapper.write_text(
            f"#!/bin/sh\nLD_LIBRARY_PATH={lib} XTABLES_LIBDIR={lib / 'xtables'} "
            f'exec {multi} {name} "$@"\n'
        )
        wrapper.chmod(0o755)
    return sh([str(bin_dir / "iptables"), "--version"], check=True).strip()


def pod_rows(node: Any, namespace: str) -> list[dict[str, Any]]:
    """Each Pod's node, phase, readiness, and its containers' image and imageID."""
    out = json.loads(node.kubectl("get", "pods", "-n", namespace, "-o", "json", check=True))
    keys = ("name", "image", "imageID", "restartCount")
    return [
        {
            "name": pod["metadata"]["name"],
            "node": pod["spec"].get("nodeName"),
            "phase": (st := pod.get("status") or {}).get("phase"),
            "ready": {"type": "Ready", "status": "True"}
            in [{k: c.get(k) for k in ("type", "status")} for c in st.get("conditions") or []],
            "containers": [{k: c.get(k) for k in keys} for c in st.get("containerStatuses") or []],
        }
        for pod in out["items"]
    ]


def helm(node: Any, *args: str, timeout: float = 300) -> str:
    """The carried helm with a private home, as the admin (raises with helm's stderr)."""
    home = node.root / "helm"
    env = {
        **node.env,
        "KUBECONFIG": str(node.payload / "admin.kubeconfig"),
        **{f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CONFIG", "CACHE", "DATA")},
    }
    proc = subprocess.run(
        [str(node.bin / "helm"), *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if proc.returncode:
        raise RuntimeError(f"helm {' '.join(args[:2])}: {proc.stderr.strip()[-1500:]}")
    return proc.stdout


def install(
    node: Any,
    chart_dir: Path,
    sh: Callable[..., str],
    wait: Callable[..., Any],
    result: dict[str, Any],
) -> None:
    """``helm install --wait`` of both charts, as ``provingground/install.py`` installs them."""
    k = node.kubectl
    sh(["sh", "-c", f"xz -dc {chart_dir / 'helm.xz'} > {node.bin / 'helm'}"], check=True)
    (node.bin / "helm").chmod(0o755)
    result["helm_version"] = helm(node, "version", "--short").strip()
    k("create", "namespace", DASK_NS, check=True)
    k("create", "namespace", PARITY_NS, check=True)
    k("label", "namespace", PARITY_NS, *RESTRICTED, check=True)
    t = time.monotonic()
    result["helm_install"] = {}
    for release, folder, ns in RELEASES:
        out = helm(
            node, "install", release, str(chart_dir / "charts" / folder), "--namespace", ns,
            "--values", str(chart_dir / "values" / f"{folder}.json"), "--wait", "--timeout=3m",
        )  # fmt: skip
        result["helm_install"][release] = out
        result[f"{ns}_available_s"] = round(time.monotonic() - t, 2)
        node.log(f"helm install {release}:", out)
    result["helm_list"] = helm(node, "list", "--all-namespaces")
    node.log(result["helm_list"])
    cluster = str(node.payload / "manifests" / "daskcluster-pass.yaml")

    def in_force() -> bool:  # the API server calls the webhook, which answers with the policy
        return PROBE in k("create", "--dry-run=server", "-o", "json", "-f", cluster)

    wait("the webhooks in force (server dry-run)", in_force, 120, node.log, 0.5)
    result["webhooks_in_force_s"] = round(time.monotonic() - t, 2)
    result["pods"] = {ns: pod_rows(node, ns) for ns in (DASK_NS, PARITY_NS)}
    result["services"] = k("get", "services", "-A", "-o", "wide")
    node.log("operator pods:", result["pods"], result["services"])


def with_host_cupy(doc: dict[str, Any], site: str, cuda: str, pyname: str) -> None:
    """Mount this machine's CuPy (and CUDA headers) into a DaskCluster; plain ``dask-worker``."""
    for part in ("scheduler", "worker"):  # CuPy and CUDA headers: this machine's, mounted
        spec = doc["spec"][part]["spec"]
        vols = spec.setdefault("volumes", [])
        vols.append({"name": "host-site", "hostPath": {"path": site, "type": "Directory"}})
        if cuda:
            vols.append({"name": "host-cuda", "hostPath": {"path": cuda, "type": "Directory"}})
        for c in spec["containers"]:
            env = c.setdefault("env", [])
            env.append(
                {"name": "PYTHONPATH", "value": f"/usr/local/lib/{pyname}/dist-packages:{site}"}
            )
            mounts = c.setdefault("volumeMounts", [])
            mounts.append({"name": "host-site", "mountPath": site, "readOnly": True})
            if cuda:
                env.append({"name": "CUDA_PATH", "value": cuda})
                mounts.append({"name": "host-cuda", "mountPath": cuda, "readOnly": True})
            if part == "worker":
                c["args"] = ["dask-worker" if a == "dask-cuda-worker" else a for a in c["args"]]
                c["args"] += ["--nthreads", "1"]


def cupy(node: Any, wait: Callable[..., Any], result: dict[str, Any]) -> None:
    """The RAPIDS CuPy example on a DaskCluster our webhook mutated."""
    site, cuda, client_env = node.cupy_env()
    res: dict[str, Any] = result.setdefault("cupy", {"site_packages": site, "cuda_path": cuda})
    man = node.payload / "manifests" / "daskcluster-cupy-with.yaml"
    k = node.kubectl
    doc = json.loads(k("create", "--dry-run=client", "-o", "json", "-f", str(man), check=True))
    name, ns = doc["metadata"]["name"], doc["metadata"]["namespace"]
    with_host_cupy(doc, site, cuda, Path(node.summary["image"]["python"]).name)
    path = node.root / "cupy-daskcluster.json"
    path.write_text(json.dumps(doc))
    t = time.monotonic()
    res["kubectl_apply"] = k("apply", "-f", str(path), check=True)
    stored = json.loads(k("get", "daskcluster", "-n", ns, name, "-o", "json", check=True))
    sched = stored["spec"]["scheduler"]["spec"]
    res["mutated"] = {
        "annotations": stored["metadata"].get("annotations", {}),
        "init_containers": [c.get("name") for c in sched.get("initContainers", [])],
        "scheduler_resources": [c.get("resources") for c in sched["containers"]],
        "node_selector": sched.get("nodeSelector"),
    }
    node.log("cupy DaskCluster as stored:", res["mutated"])

    def running() -> dict[str, Any] | None:
        pods = node.pods(name)
        ok = pods and any(
            c["name"] == "scheduler" and "running" in c.get("state", {})
            for c in pods[0]["status"].get("containerStatuses", [])
        )
        return pods[0] if ok and pods[0]["status"].get("podIP") else None

    pod = wait(f"{name} scheduler running", running, 150, node.log, 0.5)
    res["scheduler_running_s"] = round(time.monotonic() - t, 2)
    ip, pname = pod["status"]["podIP"], pod["metadata"]["name"]

    def listening() -> bool:
        return "Scheduler at:" in k("logs", "-n", ns, pname, "-c", "scheduler")

    wait(f"{name} scheduler listening", listening, 60, node.log, 0.5)
    selector = f"dask.org/cluster-name={name},dask.org/component=worker"

    def deployment() -> str:
        return str(k("get", "deployment", "-n", ns, "-l", selector, "-o", "name")).strip()

    deploy = wait(f"{name} worker Deployment", deployment, 60, node.log, 0.5)
    # The dask operator points the workers at the scheduler Service's DNS name: CoreDNS answers
    # it, kube-proxy forwards the ClusterIP to the scheduler Pod.
    res["worker_scheduler_address"] = k(
        "get", "-n", ns, deploy, "-o",
        "jsonpath={.spec.template.spec.containers[0].env[?(@.name=='DASK_SCHEDULER_ADDRESS')].value}",
    )  # fmt: skip

    def worker_running() -> bool:
        return any(
            any("running" in c.get("state", {}) for c in p["status"].get("containerStatuses", []))
            for p in node.pods(name, component="worker")
        )

    t = time.monotonic()
    wait(f"{name} worker running", worker_running, 90, node.log, 0.5)
    res["worker_running_s"] = round(time.monotonic() - t, 2)

    def registered() -> bool:  # the worker reached the scheduler through the Service
        return "Registered to:" in k("logs", "-n", ns, "-l", selector, "--tail=200", timeout=30)

    wait(f"{name} worker registered with the scheduler", registered, 90, node.log, 0.5)
    res["worker_registered_s"] = round(time.monotonic() - t, 2)
    for workload, limit in (("graph", 90), ("gather", 30)):
        res[workload] = node.cupy_client(workload, f"tcp://{ip}:8786", limit, client_env)
        node.log(f"  cupy {workload}:", res[workload])
    res["probe_log"] = k("logs", "-n", ns, pname, "-c", "gpu-parity-check")
    res["worker_log"] = k("logs", "-n", ns, "-l", selector, "--tail=40", timeout=30)
    log = k("logs", "-n", ns, pname, "-c", "scheduler")
    res["gpu_entrypoint"] = [x for x in log.splitlines() if "gpu-entrypoint" in x]
    res["get_pods"] = k("get", "pods", "-n", ns, "-o", "wide")
    (node.logs / "chart-cupy-scheduler.log").write_text(log)
    node.log("cupy:", {x: res.get(x) for x in ("gpu_entrypoint", "probe_log", "get_pods")})
    k("delete", "-f", str(path), "--wait=true", timeout=120)


def report(node: Any, result: dict[str, Any]) -> None:
    """Pods, images as containerd holds them, the operators' logs."""
    k = node.kubectl
    result["get_pods_wide"] = k("get", "pods", "-A", "-o", "wide")
    result["ctr_images"] = node.ctr("images", "ls")
    for ns in (DASK_NS, PARITY_NS):
        result.setdefault("pods_end", {})[ns] = pod_rows(node, ns)
        for pod in result["pods_end"][ns]:
            log = k("logs", "-n", ns, pod["name"], "--all-containers", timeout=30)
            (node.logs / f"pod-{ns}-{pod['name']}.log").write_text(log)
    node.log(f"-- kubectl get pods -A -o wide:\n{result['get_pods_wide']}")


def run(
    node: Any, chart_dir: Path, sh: Callable[..., str], wait: Callable[..., Any], cases: bool = True
) -> None:
    """What ``node.py --chart`` runs once the node is up (``cases``: the two DaskClusters)."""
    result: dict[str, Any] = node.summary.setdefault("chart", {})
    install(node, chart_dir, sh, wait, result)
    ops = operators.Operators(node, chart_dir, sh, wait)
    ops.result = result
    try:
        if cases:
            ops.flow()
    except Exception as exc:  # the rest still runs; record why this stopped
        result["flow_error"] = f"{type(exc).__name__}: {exc}"
        node.log("chart flow ERROR", result["flow_error"])
    if node.gpu:
        try:
            cupy(node, wait, result)
        except Exception as exc:  # as above
            result.setdefault("cupy", {})["error"] = f"{type(exc).__name__}: {exc}"
            node.log("chart cupy ERROR", result["cupy"]["error"])
    report(node, result)
