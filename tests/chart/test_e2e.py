"""The chart on the proving ground: server-side dry runs, then install, upgrade and uninstall.

kwok runs the chart's Pods (the image need not exist), so the operator itself runs on the host
with the chart ServiceAccount's token, and the webhooks point at it (webhook.url). What passes
here passes with exactly the RBAC the chart grants; `kubectl auth can-i` shows it is no more,
and writes the table into the chart README.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from dask_gpu_parity.core.verifier import default_probe_image
from provingground import K8S_VERSION
from provingground.cluster import free_port
from provingground.kubeconfig import get
from provingground.process import Process

from .helpers import CHART, CI_VALUES, REPO, Helm

pytestmark = pytest.mark.e2e

RELEASE = "dgp-e2e"
FULLNAME = f"{RELEASE}-dask-gpu-parity"
RESTRICTED = "pod-security.kubernetes.io/enforce=restricted"
CAN_I_BEGIN, CAN_I_END = "<!-- can-i:begin -->", "<!-- can-i:end -->"

# (verb, resource, scope, allowed?) as the chart's ServiceAccount. Scope "-A" is every
# namespace; "ns" the release namespace; "work" a namespace with Dask clusters; "" cluster.
CAN_I = [
    ("list", "daskgpupolicies.gpuparity.dask.org", "", True),
    ("watch", "daskgpupolicies.gpuparity.dask.org", "", True),
    ("get", "daskclusters.kubernetes.dask.org", "work", True),
    ("list", "daskclusters.kubernetes.dask.org", "-A", True),
    ("watch", "daskclusters.kubernetes.dask.org", "-A", True),
    ("list", "namespaces", "", True),
    ("watch", "namespaces", "", True),
    ("list", "nodes", "", True),
    ("watch", "nodes", "", True),
    ("list", "deviceclasses.resource.k8s.io", "", True),
    ("watch", "deviceclasses.resource.k8s.io", "", True),
    ("list", "resourceslices.resource.k8s.io", "", True),
    ("watch", "resourceslices.resource.k8s.io", "", True),
    ("create", "resourceclaims.resource.k8s.io", "work", False),
    ("patch", "resourceslices.resource.k8s.io", "", False),
    ("list", "deployments.apps", "-A", True),
    ("watch", "deployments.apps", "-A", True),
    ("create", "events", "-A", True),
    ("list", "policyreports.wgpolicyk8s.io", "-A", True),
    ("create", "policyreports.wgpolicyk8s.io", "work", True),
    ("patch", "policyreports.wgpolicyk8s.io", "work", True),
    ("delete", "policyreports.wgpolicyk8s.io", "work", True),
    ("list", "clusterpolicyreports.wgpolicyk8s.io", "", False),
    ("list", "policies.kyverno.io", "-A", False),
    ("list", "customresourcedefinitions.apiextensions.k8s.io", "", True),
    ("watch", "customresourcedefinitions.apiextensions.k8s.io", "", True),
    ("get", "secrets", "ns", False),
    ("list", "secrets", "-A", False),
    ("get", "configmaps", "-A", False),
    ("list", "pods", "-A", True),
    ("watch", "pods", "-A", True),
    ("create", "pods/exec", "work", False),
    ("create", "serviceaccounts/token", "ns", False),
    ("impersonate", "serviceaccounts", "-A", False),
    ("patch", "deployments.apps", "-A", False),
    ("create", "daskclusters.kubernetes.dask.org", "work", False),
    ("patch", "daskclusters.kubernetes.dask.org", "-A", False),
    ("delete", "daskclusters.kubernetes.dask.org", "-A", False),
    ("patch", "daskgpupolicies.gpuparity.dask.org", "", False),
    ("get", "daskgpupolicies.gpuparity.dask.org", "", False),
    ("create", "clusterroles.rbac.authorization.k8s.io", "", False),
    ("bind", "clusterroles.rbac.authorization.k8s.io", "", False),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", "", False),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", "", False),
    ("create", "rolebindings.rbac.authorization.k8s.io", "ns", False),
    ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io", "", False),
    ("delete", "validatingwebhookconfigurations.admissionregistration.k8s.io", "", False),
    ("delete", "nodes", "", False),
    ("delete", "namespaces", "", False),
    ("deletecollection", "deployments.apps", "-A", False),
    ("patch", "nodes", "", False),
]


def _wait_for(check: Callable[[], bool], timeout: float, what: str, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(interval)


@pytest.fixture(scope="module")
def e2e_helm(cluster, helm_binary, tmp_path_factory) -> Helm:
    """helm against the cluster's admin kubeconfig."""
    return Helm(helm_binary, tmp_path_factory.mktemp("helm-e2e"), kubeconfig=cluster.kubeconfig)


@pytest.fixture(scope="module")
def policy_crd(cluster, dask_operator, policyreport_crd) -> None:
    """Our CRD (Helm installs crds/ only on a first install; apply it as the README says)."""
    # The Dask CRDs (the webhooks' resources must exist) and the PolicyReport CRD, as on a
    # cluster with Kyverno: kubectl auth can-i answers no for a resource the API does not serve.
    del dask_operator, policyreport_crd
    cluster.kubectl("apply", "--server-side", "-f", str(CHART / "crds"))
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=120s",
        "crd/daskgpupolicies.gpuparity.dask.org",
    )


def _namespace(cluster, prefix: str, *labels: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", name)
    if labels:
        cluster.kubectl("label", "namespace", name, *labels)
    return name


@contextlib.contextmanager
def _namespaces(cluster, *specs: tuple[str, ...]) -> Iterator[list[str]]:
    names = [_namespace(cluster, *spec) for spec in specs]
    try:
        yield names
    finally:
        for name in names:
            cluster.release_namespace(name)


def test_every_ci_render_passes_server_side_dry_run(cluster, policy_crd, e2e_helm):
    """Each ci/*-values.yaml render, applied with --dry-run=server (strict field validation)."""
    cluster.kubectl("apply", "--server-side", "-f", str(REPO / "tests/chart/fixtures"))
    for crd in ("issuers.cert-manager.io", "certificates.cert-manager.io"):
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=120s", f"crd/{crd}")
    for crd in ("servicemonitors", "prometheusrules"):
        cluster.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=120s",
            f"crd/{crd}.monitoring.coreos.com",
        )
    with _namespaces(cluster, ("dgp-render",)) as (ns,):
        for values in CI_VALUES:
            args = e2e_helm.template_args([values], release=RELEASE, namespace=ns)
            rendered = e2e_helm.run("template", *args).stdout
            count = len([d for d in yaml.safe_load_all(rendered) if d])
            proc = cluster.kubectl(
                "apply", "--dry-run=server", "--validate=strict", "-f", "-", input=rendered
            )
            lines = [line for line in proc.stdout.splitlines() if "(server dry run)" in line]
            assert len(lines) == count, f"{values}: {proc.stdout}"


def _sa_kubeconfig(cluster, namespace: str, path: Path) -> Path:
    token = cluster.kubectl(
        "create", "token", FULLNAME, "-n", namespace, "--duration=2h"
    ).stdout.strip()
    assert cluster.control_plane is not None
    ca = base64.b64encode(cluster.control_plane.ca_cert_path.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "proving-ground",
                "cluster": {
                    "server": cluster.control_plane.server,
                    "certificate-authority-data": ca,
                },
            }
        ],
        "users": [{"name": FULLNAME, "user": {"token": token}}],
        "contexts": [
            {"name": FULLNAME, "context": {"cluster": "proving-ground", "user": FULLNAME}}
        ],
        "current-context": FULLNAME,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _dry_run_create(cluster, namespace: str, example: str):
    return cluster.kubectl(
        "create",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        str(REPO / "examples" / example),
        check=False,
    )


def _can_i(cluster, kubeconfig: Path, row: tuple[str, str, str], spaces: dict[str, str]) -> bool:
    verb, resource, scope = row
    where = {"": [], "-A": ["--all-namespaces"], "ns": ["-n", spaces["ns"]]}.get(
        scope, ["-n", spaces.get(scope, scope)]
    )
    proc = cluster.kubectl(
        "--kubeconfig", str(kubeconfig), "auth", "can-i", verb, resource, *where, check=False
    )
    answer = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert answer in ("yes", "no"), proc.stdout + proc.stderr
    return answer == "yes"


def _write_can_i_table(rows: list[tuple[str, str, str, bool, bool]]) -> None:
    scopes = {
        "": "cluster",
        "-A": "all namespaces",
        "ns": "release namespace",
        "work": "a Dask namespace",
    }
    lines = [
        CAN_I_BEGIN,
        f"Generated by `tests/chart/test_e2e.py` on the proving ground (Kubernetes {K8S_VERSION}),",
        "as the chart's ServiceAccount with the default values (drift repair off).",
        "",
        "| `kubectl auth can-i` | resource | scope | expected | answer |",
        "| --- | --- | --- | --- | --- |",
    ]
    for verb, resource, scope, expected, answer in rows:
        lines.append(
            f"| {verb} | `{resource}` | {scopes[scope]} | {'yes' if expected else 'no'} "
            f"| {'yes' if answer else 'no'} |"
        )
    lines.append(CAN_I_END)
    readme = CHART / "README.md"
    text = readme.read_text()
    head, rest = text.split(CAN_I_BEGIN, 1)
    tail = rest.split(CAN_I_END, 1)[1]
    new = head + "\n".join(lines) + tail
    if new != text:
        readme.write_text(new)


def _webhooks(cluster) -> dict[str, dict]:
    found = {}
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        proc = cluster.kubectl("get", kind, FULLNAME, "-o", "json", check=False)
        if proc.returncode == 0:
            found[kind] = json.loads(proc.stdout)
    return found


def test_install_parity_upgrade_uninstall_under_the_chart_service_account(
    cluster, node_pools, policy_crd, e2e_helm, tmp_path
):
    del node_pools, policy_crd  # GPU nodes for placement; the CRD for the default policy
    if cluster.control_plane is None:
        pytest.skip("needs the proving ground (its CA signs the host operator's certificate)")
    ca = base64.b64encode(cluster.control_plane.ca_cert_path.read_bytes()).decode()
    with (
        _namespaces(cluster, ("dgp-e2e", RESTRICTED), ("dgp-e2e-work",)) as (ns, work),
        contextlib.ExitStack() as cleanup,
    ):
        # -- helm install --wait into a namespace that enforces the restricted PSS ----------
        port = free_port()
        sets = {"webhook.url": f"https://127.0.0.1:{port}", "webhook.caBundle": ca}
        args = e2e_helm.template_args(sets=sets, release=RELEASE, namespace=ns)
        notes = e2e_helm.run("install", *args, "--wait", "--timeout=10m").stdout
        assert f"rollout status deployment/{FULLNAME}-drift" in notes
        assert "the Dask CRDs are missing" not in notes  # the lookup found them
        cleanup.callback(
            lambda: e2e_helm.run("uninstall", RELEASE, "-n", ns, "--wait", check=False)
        )
        pods = json.loads(cluster.kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
        components = sorted(p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods)
        assert components == ["drift", "webhook", "webhook"]
        for pod in pods:
            ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
            assert ready["Ready"] == "True", pod["metadata"]["name"]
        secret_before = cluster.kubectl(
            "get", "secret", f"{FULLNAME}-tls", "-n", ns, "-o", "jsonpath={.data.tls\\.crt}"
        ).stdout

        # -- the operator on the host, as the chart's ServiceAccount -------------------------
        kubeconfig = _sa_kubeconfig(cluster, ns, tmp_path / "sa.kubeconfig")
        whoami = cluster.kubectl("--kubeconfig", str(kubeconfig), "auth", "whoami", "-o", "json")
        username = json.loads(whoami.stdout)["status"]["userInfo"]["username"]
        assert username == f"system:serviceaccount:{ns}:{FULLNAME}"
        log = cluster.log_dir / "dgp-operator.log"
        operator = cleanup.enter_context(_host_operator(cluster, kubeconfig, log, port))

        # Parity under that RBAC: the UCX example is denied once the GPU nodes are indexed ...
        def ucx_denied() -> bool:
            proc = _dry_run_create(cluster, work, "gpu-cluster-ucx.yaml")
            return proc.returncode != 0 and "DGP013" in proc.stderr  # GPU nodes indexed

        _wait_for(ucx_denied, 180, "gpu-cluster-ucx.yaml denied (DGP013)")
        denied = _dry_run_create(cluster, work, "gpu-cluster-ucx.yaml").stderr
        assert 'admission webhook "mutate-daskcluster.gpuparity.dask.org"' in denied
        assert "DGP013" in denied
        # ... and the TCP example is created with a GPU on its scheduler.
        created = cluster.kubectl(
            "create", "-n", work, "-f", str(REPO / "examples" / "gpu-cluster-tcp.yaml")
        )
        assert "Warning:" in created.stderr
        scheduler = json.loads(
            cluster.kubectl("get", "daskcluster", "rapids-tcp", "-n", work, "-o", "json").stdout
        )["spec"]["scheduler"]["spec"]
        limits = scheduler["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] in ("1", 1)
        probe, check = scheduler["initContainers"]
        assert (probe["name"], check["name"]) == ("gpu-parity-probe", "gpu-parity-check")
        assert probe["image"] == default_probe_image()  # the chart's policy, as the CLI names it

        # -- kubectl auth can-i: the verbs used, and not more -------------------------------
        spaces = {"ns": ns, "work": work}
        rows = [
            (verb, res, scope, expected, _can_i(cluster, kubeconfig, (verb, res, scope), spaces))
            for verb, res, scope, expected in CAN_I
        ]
        _write_can_i_table(rows)
        assert [r for r in rows if r[3] != r[4]] == []
        operator.check_alive()
        text = log.read_text(errors="replace")
        for sign in ("Forbidden", "forbidden", "Not enough permissions", " 403"):
            assert sign not in text, f"{sign!r} in {log}"

        # -- helm upgrade: Ignore, warn mode and drift repair take effect -------------------
        upgrade = {
            **sets,
            "webhook.failurePolicy": "Ignore",
            "policy.spec.mode": "warn",
            "drift.repair": True,
        }
        args = e2e_helm.template_args(sets=upgrade, release=RELEASE, namespace=ns)
        e2e_helm.run("upgrade", *args, "--wait", "--timeout=10m")
        for config in _webhooks(cluster).values():
            assert {w["failurePolicy"] for w in config["webhooks"]} == {"Ignore"}
        mode = cluster.kubectl(
            "get", "daskgpupolicy", FULLNAME, "-o", "jsonpath={.spec.mode}"
        ).stdout
        assert mode == "warn"
        repair = ("patch", "deployments.apps", "-A")
        assert _can_i(cluster, kubeconfig, repair, spaces)  # the extra ClusterRole, only now

        def ucx_warned() -> bool:
            proc = _dry_run_create(cluster, work, "gpu-cluster-ucx.yaml")
            return proc.returncode == 0 and "DGP013" in proc.stderr

        _wait_for(ucx_warned, 180, "gpu-cluster-ucx.yaml admitted with a DGP013 warning")
        secret_after = cluster.kubectl(
            "get", "secret", f"{FULLNAME}-tls", "-n", ns, "-o", "jsonpath={.data.tls\\.crt}"
        ).stdout
        assert secret_after == secret_before  # lookup reused the generated certificate

        # -- helm uninstall leaves no webhook configuration behind --------------------------
        operator.stop()
        e2e_helm.run("uninstall", RELEASE, "-n", ns, "--wait", "--timeout=5m")
        assert _webhooks(cluster) == {}
        assert cluster.kubectl("get", "daskgpupolicy", FULLNAME, check=False).returncode != 0
        # With the operator gone, Dask creates still work (nothing dangles) and are untouched.
        plain = cluster.kubectl(
            "create", "-n", work, "-f", str(REPO / "examples" / "gpu-cluster-ucx.yaml")
        )
        assert "Warning:" not in plain.stderr


@contextlib.contextmanager
def _host_operator(cluster, kubeconfig: Path, log: Path, port: int) -> Iterator[Process]:
    """`dask-gpu-parity run` on the host as the chart's ServiceAccount, serving on ``port``."""
    assert cluster.control_plane is not None
    cert, key = cluster.control_plane.issue_serving_cert(["127.0.0.1"], name="dgp-e2e-operator")
    metrics, health = free_port(), free_port()
    argv = [
        sys.executable,
        "-m",
        "dask_gpu_parity.cli",
        "run",
        f"--tls-cert={cert}",
        f"--tls-key={key}",
        f"--port={port}",
        "--address=127.0.0.1",
        f"--metrics-port={metrics}",
        f"--health-port={health}",
    ]
    env = {**cluster.env, "KUBECONFIG": str(kubeconfig), "PYTHONWARNINGS": "ignore"}
    proc = Process("dgp-operator", argv, log, env=env, cwd=REPO)
    try:
        proc.wait_until(
            lambda: get(f"http://127.0.0.1:{health}/healthz")[0] == 200, 180, "live", 0.5
        )
        proc.wait_until(lambda: _port_open(port), 180, "serving webhooks", 0.5)
        yield proc
    finally:
        proc.stop()
