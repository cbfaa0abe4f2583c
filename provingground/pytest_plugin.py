"""pytest plugin: the proving ground (default) or any cluster given by --kubeconfig/KUBECONFIG.

Registered once for every test folder by the repository's root ``conftest.py``, so the e2e,
admission, chart and proving-ground tests share one proving ground per session.

Without the proving-ground binaries the e2e tests skip locally and fail under CI=... so a
green CI cannot hide a missing build step.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from kubernetes import client

from .binaries import Binaries, BinariesMissingError, StaleCacheError, find_binaries
from .cluster import ControlPlane
from .dask_operator import DaskOperator, install_crds
from .dra import DRA_POOL_SIZES, delete_dra_objects, publish
from .ground import ProvingGround
from .node import NodeBinariesMissingError, RealNode, find_node_binaries
from .node.host import LOCK_FILE, lock_holder, reachable_address
from .node.join import join
from .nodes import api_client, create_nodes, delete_nodes, wait_nodes_ready
from .policyreports import CRD_NAME, install_policyreport_crd
from .pools import FLEETS, POOL_LABEL, node_manifests, pools
from .process import Tool, log_tail


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--kubeconfig``: run the e2e tests against that cluster instead of the proving ground."""
    parser.addoption(
        "--kubeconfig",
        default=None,
        help="run e2e tests against this cluster instead of starting the proving ground "
        "(KUBECONFIG works too)",
    )


@dataclass
class E2ECluster:
    """What tests need from a cluster, whichever kind it is."""

    kubeconfig: Path
    kubectl_bin: str
    api: client.ApiClient
    log_dir: Path
    control_plane: ControlPlane | None = None  # None on an external cluster

    @property
    def env(self) -> dict[str, str]:
        """This process's environment with KUBECONFIG pointing at the cluster."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the cluster; with ``check``, a failure fails the test."""
        kubectl = Tool(
            [self.kubectl_bin, "--kubeconfig", self.kubeconfig], self.env, error=AssertionError
        )
        return kubectl.run(*args, check=check, input=input, timeout=120)

    def release_namespace(self, name: str) -> None:
        """Delete a test's namespace without waiting, its Dask resources first.

        Deleting the namespace alone leaves the dask operator retrying creates there, each
        refused with 403 (the namespace is terminating); kr8s answers every 403 by rebuilding
        its one shared HTTP client, which breaks the requests other DaskClusters have in
        flight (``ReadError``, ``Request URL is missing an 'http://' ...``) and delays their
        components by the 60 s of kopf's retry. So the Dask resources go first, while the
        namespace still accepts the operator's writes, then the namespace.
        """
        _delete_dask_resources(self.api, name)
        self.kubectl("delete", "namespace", name, "--wait=false", check=False)


DASK_PLURALS = ("daskjobs", "daskautoscalers", "daskclusters", "daskworkergroups")


def _delete_dask_resources(api: client.ApiClient, namespace: str, timeout: float = 30) -> None:
    """Delete the namespace's dask-kubernetes resources and wait (bounded) until they are gone.

    Where the CRDs are not installed, or the namespace is already gone, there is nothing to do.
    """
    custom = client.CustomObjectsApi(api)
    group = ("kubernetes.dask.org", "v1", namespace)
    served = []
    for plural in DASK_PLURALS:
        try:
            custom.delete_collection_namespaced_custom_object(*group, plural)
        except client.ApiException:
            continue  # not served (404), or not ours to delete: the namespace's deletion decides
        served.append(plural)
    deadline = time.monotonic() + timeout
    while served and time.monotonic() < deadline:
        if not any(_items(custom.list_namespaced_custom_object(*group, p)) for p in served):
            return
        time.sleep(0.2)


def _items(listing: object) -> list[object]:
    """The ``items`` of a custom objects LIST (typed ``object`` by the client)."""
    return list(listing.get("items") or []) if isinstance(listing, dict) else []


def skip_or_fail(reason: str, under_ci: str = "these tests must run, not skip") -> NoReturn:
    """Skip for want of a tool, binary or image; fail instead where ``$CI`` is set.

    ``make test`` builds everything its tests need, so under CI a missing part is a broken
    build, never a reason to skip. ``under_ci`` says why in the failure.
    """
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: {under_ci})", pytrace=False)
    pytest.skip(reason)


def _binaries_or_skip() -> Binaries:
    try:
        return find_binaries()
    except (BinariesMissingError, StaleCacheError) as exc:
        skip_or_fail(str(exc), "e2e tests must run, not skip")


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    """The proving-ground binaries (skip, or fail under CI, when they are not built)."""
    return _binaries_or_skip()


@pytest.fixture(scope="session")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[E2ECluster]:
    """A session-wide cluster: the proving ground unless --kubeconfig/KUBECONFIG is given."""
    external = request.config.getoption("--kubeconfig") or os.environ.get("KUBECONFIG")
    log_dir = tmp_path_factory.mktemp("e2e-logs")
    if external:
        kubectl = shutil.which("kubectl")
        with contextlib.suppress(BinariesMissingError, StaleCacheError):
            kubectl = str(find_binaries().kubectl)
        if kubectl is None:
            pytest.skip("No kubectl on PATH and no proving-ground kubectl: `make controlplane`")
        api = api_client(external)
        yield E2ECluster(Path(external), kubectl, api, log_dir)
        api.close()
        return
    bins = _binaries_or_skip()
    # An address pods can reach, so a real node's pods (the real_node fixture) reach the API
    # server through the kubernetes Service; None on a loopback-only host.
    cp = ControlPlane(
        tmp_path_factory.mktemp("proving-ground"),
        binaries=bins,
        advertise_address=reachable_address(),
    )
    request.config.stash[_CP_KEY] = cp
    with cp:
        api = api_client(cp.kubeconfig)
        yield E2ECluster(cp.kubeconfig, str(bins.kubectl), api, cp.logs, cp)
        api.close()


_CP_KEY = pytest.StashKey[ControlPlane]()


@pytest.fixture(scope="session")
def node_pools(cluster: E2ECluster) -> dict[str, int]:
    """The simulated GPU/CPU pools at their default sizes, Ready. Returns pool -> size."""
    sizes = {p.name: p.size for p in pools()}
    create_nodes(cluster.api, node_manifests(sizes))
    try:
        wait_nodes_ready(cluster.api, sum(sizes.values()), timeout=90)
    except TimeoutError as exc:
        if cluster.control_plane is None:
            pytest.skip(f"Simulated nodes need kwok on this cluster: {exc}")
        raise
    return sizes


@pytest.fixture(scope="module")
def dra_pools(cluster: E2ECluster, node_pools: dict[str, int]) -> Iterator[dict[str, int]]:
    """The DRA pools (``provingground.dra.DRA_POOL_SIZES``) beside the default ones, Ready.

    NVIDIA's DeviceClasses and each DRA node's ResourceSlice are created. With ``node_pools``
    this is the "mixed" fleet; the pools ``t4-dra``, ``a100-dra``, ``h100-dra``, ``a100-mig-dra``
    alone are
    "pure-dra", ``a100-migrating`` is "migrating" (``pools.FLEETS``). Yields pool -> size, and
    deletes those nodes and slices after the module, so that other modules see the default
    fleet only; the DeviceClasses stay.
    """
    selector = f"{POOL_LABEL} in ({','.join(sorted(DRA_POOL_SIZES))})"
    sizes = {**dict.fromkeys(node_pools, 0), **DRA_POOL_SIZES}
    create_nodes(cluster.api, node_manifests(sizes))
    try:
        wait_nodes_ready(cluster.api, sum(DRA_POOL_SIZES.values()), selector, timeout=90)
        publish(cluster.api, sizes)
        yield dict(DRA_POOL_SIZES)
    finally:
        delete_nodes(cluster.api, selector)
        delete_dra_objects(cluster.api, selector)


@pytest.fixture(scope="module")
def fleet_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[E2ECluster]:
    """A proving ground of its own whose nodes are one fleet kind (``pools.FLEETS``), Ready.

    For a fleet the shared ``cluster`` cannot be, e.g. one with no device-plugin GPU node:
    ``@pytest.mark.parametrize("fleet_cluster", ["pure-dra"], indirect=True)`` (default
    ``mixed``). DRA nodes' slices and NVIDIA's DeviceClasses are published; no dask operator.
    Started per module (a few seconds), stopped after it.
    """
    kind = getattr(request, "param", "mixed")
    if kind not in FLEETS:
        pytest.fail(f"Unknown fleet kind {kind!r}; known: {sorted(FLEETS)}", pytrace=False)
    bins = _binaries_or_skip()
    run_dir = tmp_path_factory.mktemp(f"fleet-{kind}")
    with ProvingGround(run_dir, sizes=FLEETS[kind], dask_operator=False, binaries=bins) as ground:
        cp = ground.control_plane
        api = api_client(cp.kubeconfig)
        yield E2ECluster(cp.kubeconfig, str(bins.kubectl), api, cp.logs, cp)
        api.close()


@pytest.fixture(scope="session")
def policyreport_crd(cluster: E2ECluster) -> str:
    """The PolicyReport CRD: installed on the proving ground; elsewhere it must be there."""
    if cluster.control_plane is not None:
        install_policyreport_crd(cluster.kubectl)
    elif cluster.kubectl("get", "crd", CRD_NAME, check=False).returncode:
        pytest.skip(f"CRD {CRD_NAME} is not installed (Kyverno or Policy Reporter install it)")
    return CRD_NAME


@pytest.fixture(scope="session")
def dask_operator(cluster: E2ECluster) -> Iterator[DaskOperator]:
    """The dask-kubernetes CRDs plus its real controller (kopf), watching all namespaces."""
    install_crds(cluster.kubectl)
    with DaskOperator(cluster.kubeconfig, cluster.log_dir, env=cluster.env) as operator:
        yield operator


@pytest.fixture(scope="session")
def real_node(cluster: E2ECluster, request: pytest.FixtureRequest) -> Iterator[RealNode]:
    """A real node (kubelet, containerd, kube-proxy, CoreDNS) joined to the proving ground.

    Its name is ``provingground.node.join.REAL_NODE_NAME``; select it with
    ``nodeSelector: REAL_NODE_SELECTOR``. The test image (``localhost/node/busybox:test``) is
    imported; import more with ``real_node.import_images([archive, ...])``. Skipped (never
    failed) when ``make node`` has not built the binaries, or on an external cluster.
    """
    cp = cluster.control_plane
    if cp is None:
        pytest.skip("The real node joins the proving ground only, not an external cluster")
    try:
        binaries = find_node_binaries()
    except NodeBinariesMissingError as exc:
        pytest.skip(str(exc))
    if cp.advertise_address is None:
        pytest.skip("The real node needs a non-loopback IPv4 address on this host")
    if holder := lock_holder():
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"real node: waiting for {LOCK_FILE}, held by {holder}")
    node = join(cp, binaries, images=[binaries.test_image])
    with node:
        yield node


@pytest.fixture
def namespace(cluster: E2ECluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, deleted (without waiting) afterwards."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"e2e-{stem}-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.release_namespace(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On an e2e failure, attach each component's log tail to the report."""
    report = yield
    cp = item.config.stash.get(_CP_KEY, None)
    if report.failed and cp is not None and item.get_closest_marker("e2e"):
        for log in sorted(cp.logs.glob("*.log")):
            report.sections.append((f"proving ground: {log.name}", log_tail(log, 15)))
    return report
