"""The real node's host-wide lock and its configuration choices (no binaries needed)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provingground.node import configs, dra, host
from provingground.node.dns import kube_dns_objects
from provingground.node.join import REAL_NODE_LABEL, real_node_spec
from provingground.pools import POOL_LABEL

HOLD = """
import sys, time
from pathlib import Path
from provingground.node.host import HostLock
lock = HostLock(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
Path(sys.argv[1] + ".released").touch()  # written while the lock is still held
lock.release()
"""


def test_a_second_node_on_the_host_waits_for_the_first_to_release_the_lock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "node.lock"
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), "2"], stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert host.lock_holder(path) == f"pid {holder.pid}"  # what the waiting run is told
        lock = host.HostLock(path)
        lock.acquire()
        try:
            assert (tmp_path / "node.lock.released").exists()  # it waited for the holder
            assert holder.wait(5) == 0
            assert path.read_text().strip() == f"pid {os.getpid()}"
        finally:
            lock.release()


def test_a_second_node_in_the_same_process_is_refused_instead_of_waiting_forever(
    tmp_path: Path,
) -> None:
    first = host.HostLock(tmp_path / "node.lock")
    first.acquire()
    try:
        with pytest.raises(RuntimeError, match="already runs a real node"):
            host.HostLock(tmp_path / "node.lock").acquire()
    finally:
        first.release()
    assert host.lock_holder(tmp_path / "node.lock") is None
    again = host.HostLock(tmp_path / "node.lock")
    again.acquire()
    again.release()


def test_kubelet_accepts_cgroup_v1_only_where_the_host_has_it(tmp_path: Path) -> None:
    spec = real_node_spec()
    v1 = configs.kubelet_config(tmp_path, tmp_path / "ca.crt", spec, cgroup_v1=True)
    v2 = configs.kubelet_config(tmp_path, tmp_path / "ca.crt", spec, cgroup_v1=False)
    assert v1["failCgroupV1"] is False
    assert "failCgroupV1" not in v2


def test_cgroup_version_matches_the_hosts_mounts() -> None:
    unified = Path("/sys/fs/cgroup/cgroup.controllers")
    expected = 2 if unified.is_file() and unified.read_text().split() else 1
    assert host.cgroup_version() == expected


def test_pods_on_the_real_node_resolve_names_through_the_cluster_dns() -> None:
    config = configs.kubelet_config(Path("/r"), Path("/ca"), real_node_spec(), cgroup_v1=False)
    assert config["clusterDNS"] == ["10.0.0.10"]
    assert config["clusterDomain"] == "cluster.local"
    service, endpoints = kube_dns_objects("10.0.0.10", "192.0.2.2", 10053)
    assert service["spec"]["clusterIP"] == "10.0.0.10"
    assert {p["port"] for p in service["spec"]["ports"]} == {53}
    assert endpoints["endpoints"][0]["addresses"] == ["192.0.2.2"]
    assert endpoints["metadata"]["labels"]["kubernetes.io/service-name"] == "kube-dns"


def test_the_real_node_is_labelled_apart_from_the_kwok_pools() -> None:
    labels = real_node_spec().labels
    assert labels == {REAL_NODE_LABEL: "true"}
    assert POOL_LABEL not in labels  # pool listings and pool clean-ups never include it
    assert real_node_spec().taints == []


def test_lock_wait_is_reported_in_seconds(tmp_path: Path) -> None:
    lock = host.HostLock(tmp_path / "node.lock")
    t0 = time.monotonic()
    waited = lock.acquire()
    lock.release()
    assert 0 <= waited <= time.monotonic() - t0


def test_dra_plugin_registers_under_kubelets_root_and_containerd_reads_its_cdi_specs(
    tmp_path: Path,
) -> None:
    plugin = dra.DraPlugin(tmp_path / "dra-gpu-plugin", tmp_path / "gpus.json")
    argv = dra.plugin_argv(
        plugin,
        node="real-node",
        kubeconfig=tmp_path / "admin.kubeconfig",
        kubelet_root=tmp_path / "kubelet",
        cdi_dir=tmp_path / "cdi",
    )
    assert f"--registrar-dir={tmp_path}/kubelet/plugins_registry" in argv
    assert f"--plugin-dir={tmp_path}/kubelet/plugins/gpu.nvidia.com" in argv
    assert f"--devices={tmp_path}/gpus.json" in argv
    toml = configs.containerd_config(
        tmp_path, tmp_path / "bin", tmp_path / "cni", real_node_spec(), restrict_oom=False
    )
    assert f'cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi", "{tmp_path}/cdi"]' in toml


def test_dra_device_class_is_nvidias_with_the_extended_resource_name() -> None:
    # As the DRA driver's Helm chart renders its deviceclass-gpu template for resource.k8s.io/v1.
    cls = dra.device_class()
    assert cls["apiVersion"] == "resource.k8s.io/v1"
    assert cls["metadata"]["name"] == "gpu.nvidia.com"
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert cls["spec"]["selectors"] == [
        {
            "cel": {
                "expression": "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'gpu'"
            }
        }
    ]
