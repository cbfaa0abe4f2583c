"""The proving ground itself: version, node pools, and clear errors without orphan processes."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509

from provingground import (
    K8S_VERSION,
    POOL_LABEL,
    POOLS,
    ComponentError,
    ControlPlane,
    Ports,
    StaleCacheError,
    find_binaries,
)
from provingground.binaries import Binaries, manifest_line
from provingground.pytest_plugin import E2ECluster


def _assert_all_stopped(cp: ControlPlane) -> None:
    assert cp.processes, "the control plane started nothing"
    for name, proc in cp.processes.items():
        assert proc.poll() is not None, f"{name} (pid {proc.pid}) still running"
        assert not Path(f"/proc/{proc.pid}").exists(), f"{name} pid {proc.pid} left behind"


@pytest.mark.e2e
def test_kubectl_reports_server_version(cluster: E2ECluster) -> None:
    if cluster.control_plane is None:
        pytest.skip("external cluster: its version is whatever it is")
    out = cluster.kubectl("version", "-o", "json").stdout
    assert f'"gitVersion": "{K8S_VERSION}"' in out.split('"serverVersion"')[1]


@pytest.mark.e2e
def test_node_pools_ready_with_gfd_labels(cluster: E2ECluster, node_pools: dict[str, int]) -> None:
    out = cluster.kubectl(
        "get",
        "nodes",
        "-l",
        POOL_LABEL,
        "--no-headers",
        "-L",
        f"{POOL_LABEL},nvidia.com/gpu.product,nvidia.com/cuda.driver-version.full",
    ).stdout
    lines = [line.split() for line in out.splitlines()]
    assert len(lines) == sum(node_pools.values()), out
    for cols in lines:
        name, status, extra = cols[0], cols[1], cols[5:]
        pool = POOLS[name.rsplit("-", 1)[0]]
        assert status == "Ready", out
        expected = [pool.name, pool.product, pool.driver] if pool.has_gpu else [pool.name]
        assert extra == expected, cols


@pytest.mark.e2e
def test_issue_serving_cert_is_signed_by_cluster_ca(cluster: E2ECluster) -> None:
    cp = cluster.control_plane
    if cp is None:
        pytest.skip("needs the proving ground's CA")
    cert_path, key_path = cp.issue_serving_cert(["127.0.0.1", "localhost"])
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    ca = x509.load_pem_x509_certificate(cp.ca_cert_path.read_bytes())
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_path, key_path)


@pytest.mark.e2e
@pytest.mark.parametrize("component", ["etcd", "apiserver"])
def test_port_conflict_is_a_clear_error(binaries: Binaries, tmp_path: Path, component: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        cp = ControlPlane(tmp_path, binaries=binaries, ports=Ports(**{component: port}))
        with pytest.raises(ComponentError) as err:
            cp.start()
    message = str(err.value)
    assert message.startswith("etcd " if component == "etcd" else "kube-apiserver ")
    assert "address already in use" in message
    assert str(cp.logs) in message
    _assert_all_stopped(cp)


@pytest.mark.e2e
def test_component_dying_during_start_is_a_clear_error(binaries: Binaries, tmp_path: Path) -> None:
    cp = ControlPlane(
        tmp_path, binaries=binaries, extra_args={"kube-scheduler": ["--no-such-flag"]}
    )
    with pytest.raises(ComponentError) as err:
        cp.start()
    message = str(err.value)
    assert message.startswith("kube-scheduler exited with code")
    assert "unknown flag: --no-such-flag" in message
    _assert_all_stopped(cp)


@pytest.mark.e2e
def test_stop_leaves_no_processes(binaries: Binaries, tmp_path: Path) -> None:
    cp = ControlPlane(tmp_path, binaries=binaries).start()
    assert cp.timings["ready"] < 60
    assert set(cp.rss_bytes()) == set(cp.processes)
    cp.stop()
    _assert_all_stopped(cp)
    assert not (tmp_path / "pids").exists()


def _fake_cache(root: Path, manifest: str | None) -> Path:
    root.mkdir()
    for name in ("etcd", "kube-apiserver"):
        (root / name).write_text("#!/bin/sh\n")
        (root / name).chmod(0o755)
    if manifest is not None:
        (root / "MANIFEST").write_text(manifest + "\n")
    return root


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        pytest.param(None, "no MANIFEST", id="interrupted-build"),
        pytest.param("k8s=v1.35.4 kwok=v0.8.0 helm=v4.3.2", "MANIFEST says", id="other-version"),
        pytest.param(manifest_line(), "kube-controller-manager is missing", id="binary-missing"),
    ],
)
def test_stale_cache_folder_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manifest: str | None, expected: str
) -> None:
    root = _fake_cache(tmp_path / K8S_VERSION, manifest)
    monkeypatch.setenv("DGP_BIN", str(root))
    with pytest.raises(StaleCacheError) as err:
        ControlPlane(tmp_path / "run")
    assert expected in str(err.value)
    assert "make controlplane" in str(err.value)
    with pytest.raises(StaleCacheError):
        find_binaries(root)
    assert not os.path.exists(tmp_path / "run" / "pids")


@pytest.mark.e2e
def test_killed_parent_leaves_no_orphans(binaries: Binaries, tmp_path: Path) -> None:
    # SIGKILL skips atexit and finally: PR_SET_PDEATHSIG must take the components down.
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from provingground import ControlPlane\n"
        f"ControlPlane(Path({str(tmp_path)!r})).start()\n"
        "os.kill(os.getpid(), 9)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DGP_BIN": str(binaries.root)}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    lines = [line.split() for line in (tmp_path / "pids").read_text().splitlines()]
    pids = [int(pid) for pid, name, _ in lines if name != "owner"]
    assert len(pids) == 5
    deadline = time.monotonic() + 10
    while [p for p in pids if Path(f"/proc/{p}").exists()] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]


@pytest.mark.e2e
def test_restart_apiserver_keeps_port_flags_and_objects(cluster: E2ECluster) -> None:
    cp = cluster.control_plane
    if cp is None:
        pytest.skip("restarts the proving ground's own API server")
    name = f"restart-{os.getpid()}"
    cluster.kubectl("create", "configmap", name, "-n", "default", "--from-literal=kept=yes")
    old = cp.processes["kube-apiserver"]
    seconds = cp.restart_apiserver(down_seconds=0.5)
    new = cp.processes["kube-apiserver"]
    try:
        assert new.pid != old.pid
        assert old.poll() == -9  # killed, as a crash would
        assert new.argv == old.argv  # same port, same flags
        assert cp.api_get("/readyz")[0] == 200
        assert 0.5 < seconds < cp.start_timeout + 1
        out = cluster.kubectl("get", "configmap", name, "-n", "default", "-o", "json").stdout
        assert '"kept": "yes"' in out  # etcd kept it
        pids = [line.split()[0] for line in (cp.run_dir / "pids").read_text().splitlines()]
        assert str(new.pid) in pids
        assert str(old.pid) not in pids
        cp.check_alive()  # the other components rode it out
    finally:
        cluster.kubectl("delete", "configmap", name, "-n", "default", check=False)
