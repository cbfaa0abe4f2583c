"""Stopping a node and removing what it made on the host: processes, mounts, bridge, rules.

``stop_node`` runs at every stop. ``host_leftovers`` runs at every start, under the host
lock: what a killed run could not remove (its processes, mounts and root are recorded in
``STATE_FILE`` while it runs), then the node's bridge, kube-proxy's rules and the ``kubepods``
cgroups, which belong to no one else while the lock is held.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from . import host
from .configs import NodeSpec

if TYPE_CHECKING:
    from .harness import RealNode

__all__ = ["STATE_FILE", "host_leftovers", "leftovers", "stop_node"]

STATE_FILE = host.LOCK_FILE.with_suffix(".state.json")
_CGROUP = Path("/sys/fs/cgroup")


def _cgroup_roots() -> list[Path]:
    """Where kubelet puts ``kubepods``: the unified root, or each v1 hierarchy."""
    if host.cgroup_version() == 2:
        return [_CGROUP]
    return [p for p in sorted(_CGROUP.iterdir()) if p.is_dir() and not p.is_symlink()]


def _kubepods() -> list[Path]:
    return [d for root in _cgroup_roots() for d in sorted(root.glob("kubepods*")) if d.is_dir()]


def _subtree(group: Path) -> list[Path]:
    """The cgroup folders under ``group`` and itself, deepest first.

    kubelet and runc remove cgroups while this runs: ``os.walk`` skips a folder that vanished
    under it, where ``Path.rglob`` raises ``FileNotFoundError``.
    """
    return [Path(d) for d, _, _ in os.walk(group, topdown=False)]


def _kill_cgroups() -> None:
    """SIGKILL every process in the ``kubepods`` cgroups, then remove them, deepest first."""
    groups = _kubepods()
    for group in groups:
        for folder in _subtree(group):
            with contextlib.suppress(OSError, ValueError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
    for _ in range(50):
        left = []
        for group in groups:
            for d in _subtree(group):
                with contextlib.suppress(FileNotFoundError):
                    try:
                        d.rmdir()
                    except OSError:
                        left.append(d)
        if not left:
            return
        time.sleep(0.1)


def _unmount_under(root: Path) -> None:
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    prefix = str(root).rstrip("/") + "/"
    for mount in sorted(mounts, key=len, reverse=True):
        path = mount.replace("\\040", " ")
        if path.startswith(prefix) or path == str(root):
            host.sh(["umount", "-l", path], timeout=20)


def _kill_recorded(pids: list[list[str]]) -> None:
    for pid_s, exe in pids:
        with contextlib.suppress(OSError, ValueError):
            if os.readlink(f"/proc/{pid_s}/exe") == exe:
                os.kill(int(pid_s), signal.SIGKILL)


def _remove_bridge(bridge: str) -> None:
    # Without `ip` (the GPU machine) the bridge stays: that machine is not reused.
    if Path(f"/sys/class/net/{bridge}").exists() and shutil.which("ip"):
        host.sh(["ip", "link", "delete", bridge], timeout=20)


def _proxy_cleanup(bin_dir: Path) -> None:
    """kube-proxy's own clean-up (iptables, nftables, IPVS), then any ``KUBE-*`` chain left."""
    if not host.has_netfilter_tools():
        return
    k8s = bin_dir / "k8s"
    if k8s.exists():
        host.sh([str(k8s), "kube-proxy", "--cleanup", "--v=0"], timeout=60)
    for tool in ("iptables", "ip6tables"):
        _remove_kube_chains(tool)


def _remove_kube_chains(tool: str) -> None:
    """Delete the jumps into ``KUBE-*`` chains, then those chains, in every table."""
    table = ""
    jumps: list[tuple[str, list[str]]] = []
    chains: list[tuple[str, str]] = []
    for line in host.sh([f"{tool}-save"]).splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":KUBE-"):
            chains.append((table, line[1:].split()[0]))
        elif line.startswith("-A ") and not line.split()[1].startswith("KUBE-"):
            words = shlex.split(line)
            if any(w.startswith("KUBE-") for w in words[2:]):
                jumps.append((table, words[1:]))
    for table, rule in jumps:
        host.sh([tool, "-w", "-t", table, "-D", *rule])
    for flag in ("-F", "-X"):
        for table, chain in chains:
            host.sh([tool, "-w", "-t", table, flag, chain])


def _unmount_inside(root_id: list[int]) -> None:
    """Unmount what lies inside the folder with this (device, inode), wherever it is now.

    By identity, not path: a killed run's root may have been renamed since (pytest renames
    old temporary folders to ``garbage-*`` before deleting them).
    """
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted(mounts, key=len, reverse=True):
        for parent in Path(mount.replace("\\040", " ")).parents:
            with contextlib.suppress(OSError):
                st = parent.stat()
                if [st.st_dev, st.st_ino] == root_id:
                    host.sh(["umount", "-l", str(Path(mount))], timeout=20)
                    break


def host_leftovers(spec: NodeSpec, bin_dir: Path) -> None:
    """Remove what an earlier node on this host left behind (call with the lock held)."""
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
        state = json.loads(STATE_FILE.read_text())
        _kill_recorded(state.get("pids", []))
        _unmount_under(Path(state["root"]))
        _unmount_inside(state["root_id"])
    _kill_cgroups()
    _proxy_cleanup(bin_dir)
    _remove_bridge(spec.bridge)
    STATE_FILE.unlink(missing_ok=True)


def record(node: RealNode) -> None:
    """Write ``STATE_FILE``: the node's root and its processes (for a later ``host_leftovers``)."""
    pids = [[str(p.pid), p.argv[0]] for p in node.processes.values()]
    st = node.root.stat()
    state = {"root": str(node.root), "root_id": [st.st_dev, st.st_ino], "pids": pids}
    STATE_FILE.write_text(json.dumps(state))


def stop_node(node: RealNode) -> None:
    """Kill the pods' containers, stop the components, then remove every trace on the host."""
    _kill_cgroups()  # containers first, so kubelet restarts nothing while it stops
    for proc in reversed(list(node.processes.values())):
        proc.stop(timeout=10)
    shim = str(node.bin / "containerd-shim-runc-v2")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/exe") == shim:
                os.kill(int(pid), signal.SIGKILL)
    _kill_cgroups()
    if node.spec.services:
        _proxy_cleanup(node.src_bin)
    _unmount_under(node.root)
    _unmount_under(node.kubelet_root)
    _remove_bridge(node.spec.bridge)
    STATE_FILE.unlink(missing_ok=True)


def leftovers(spec: NodeSpec, root: Path, made: Sequence[Path] = ()) -> list[str]:
    """What a stopped node left: processes, mounts, the bridge, rules, cgroups, ``made`` folders."""
    found = [f"folder {p}" for p in made if p.exists()]
    prefix = str(root) + "/"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/exe").startswith(prefix):
                found.append(f"process {pid}")
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    found += [f"mount {m}" for m in mounts if m.startswith(prefix)]
    if Path(f"/sys/class/net/{spec.bridge}").exists():
        found.append(f"bridge {spec.bridge}")
    if host.has_netfilter_tools():
        rules = host.sh(["iptables-save"]) + host.sh(["ip6tables-save"])
        rules += host.sh(["sh", "-c", "nft list tables 2>/dev/null"])
        found += [
            f"rule {line}" for line in rules.splitlines() if "KUBE-" in line or "kube-proxy" in line
        ][:5]
    found += [f"cgroup {d}" for d in _kubepods()]
    return found
