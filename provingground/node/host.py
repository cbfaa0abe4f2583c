"""What this machine offers a node, and the host-wide state a node changes.

Standard library only: the GPU machine runs this with its own Python and nothing of ours.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, ClassVar

__all__ = [
    "LOCK_FILE",
    "HostLock",
    "Sysctls",
    "answers_ok",
    "can_lower_oom_score_adj",
    "cgroup_version",
    "free_port",
    "has_netfilter_tools",
    "lock_holder",
    "node_ip",
    "reachable_address",
    "sh",
]

# One fixed file for every checkout and run on this machine: the bridge, the iptables rules,
# the sysctls and the cgroups a node makes are the host's, so two nodes must never overlap.
LOCK_FILE = Path("/run/lock/dask-gpu-parity-node.lock")
_SIOCGIFADDR, _SIOCSIFADDR = 0x8915, 0x8916
# kubelet and kube-proxy write these; the node puts back what it found.
_SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


# Host folders kubelet, containerd and the CNI plugins write whatever their configuration says
# (the device-plugin socket folder, runc's and the shims' state, the CNI result cache).
HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/run/containerd",
    "/var/log/pods",
    "/var/log/containers",
)


def sh(cmd: list[str], *, timeout: float = 60, check: bool = False) -> str:
    """Run ``cmd``; return stdout and stderr together (raise on failure when ``check``)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    out = (proc.stdout + proc.stderr).strip()
    if check and proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {out[-2000:]}")
    return out


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port on ``address`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def answers_ok(url: str) -> bool:
    """Whether GET ``url`` (a component's plain-HTTP health endpoint) answers 200."""
    with urllib.request.urlopen(url, timeout=2) as resp:  # loopback health URL
        return int(resp.status) == 200


def cgroup_version() -> int:
    """2 on a unified (cgroup2-only) host, else 1: kubelet then needs ``failCgroupV1: false``."""
    with contextlib.suppress(OSError):
        if Path("/sys/fs/cgroup/cgroup.controllers").read_text().split():
            return 2
    return 1


def can_lower_oom_score_adj() -> bool:
    """Whether root may lower ``oom_score_adj`` here (runc does, for the pause container)."""
    proc = subprocess.run(
        ["sh", "-c", "echo -999 > /proc/self/oom_score_adj"], capture_output=True, check=False
    )
    return proc.returncode == 0


def _addresses() -> list[str]:
    out = []
    for name in sorted(os.listdir("/sys/class/net")):
        if name == "lo" or name.startswith(("veth", "cni", "node", "gpunode", "docker")):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                raw = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
            except OSError:
                continue  # no IPv4 address on this interface
            out.append(socket.inet_ntoa(raw[20:24]))
    return out


def reachable_address() -> str | None:
    """The first IPv4 address of a non-loopback interface, or None on a loopback-only host."""
    found = _addresses()
    return found[0] if found else None


def node_ip() -> str:
    """The node's address: a non-loopback one (kubelet refuses 127/8), made on ``lo`` if none."""
    if found := reachable_address():
        return found
    alias, addr = b"lo:node", "10.254.254.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        sin = struct.pack("HH4s8s", socket.AF_INET, 0, socket.inet_aton(addr), b"")
        fcntl.ioctl(s.fileno(), _SIOCSIFADDR, struct.pack("16s16s", alias, sin))
    return addr


def has_netfilter_tools() -> bool:
    """Whether ``iptables`` (with ``iptables-restore``) is installed: kube-proxy needs them."""
    return all(shutil.which(t) for t in ("iptables", "iptables-restore", "ip"))


def lock_holder(path: Path = LOCK_FILE) -> str | None:
    """Who holds the host lock now (the file's ``pid N``), or None when it is free."""
    if path in HostLock._held_here:
        return f"pid {os.getpid()} (this process)"
    with contextlib.suppress(FileNotFoundError), path.open() as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return f.read().strip() or "another process"
    return None


class HostLock:
    """An exclusive ``flock`` on ``LOCK_FILE`` for a node's whole life: a second run waits."""

    _held_here: ClassVar[set[Path]] = set()  # flock would block forever on itself

    def __init__(self, path: Path = LOCK_FILE) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def acquire(self) -> float:
        """Block until the lock is ours; return the seconds waited.

        Raises:
            RuntimeError: this process already holds it (a second node here would wait
                forever for the first).
        """
        if self.path in HostLock._held_here:
            raise RuntimeError(
                f"This process already runs a real node (it holds {self.path}): one node per host"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = self.path.open("a+")
        t0 = time.monotonic()
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            print(f"node: waiting for {self.path} (held by {holder})", file=sys.stderr, flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}\n")
        f.flush()
        self._file = f
        HostLock._held_here.add(self.path)
        return time.monotonic() - t0

    def release(self) -> None:
        """Give the lock back (closing the file releases it too, even on SIGKILL)."""
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
            HostLock._held_here.discard(self.path)

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._file is not None


def _nft_tables() -> set[str]:
    if not shutil.which("nft"):
        return set()
    return {line for line in sh(["nft", "list", "tables"]).splitlines() if line.startswith("table")}


class Sysctls:
    """The kernel settings a node changes: read before it starts, written back when it stops.

    Also the nftables tables: ``iptables-nft`` makes ``ip filter``, ``ip nat``, ... on first
    use; those that were not there before and are empty again are deleted. And the folders of
    ``HOST_PATHS`` that were not there before are removed.
    """

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}
        self.tables: set[str] = set()
        self.absent: list[Path] = []

    def save(self) -> None:
        """Remember the current value of each setting this host has."""
        for key in _SYSCTLS:
            with contextlib.suppress(OSError):
                self.saved[key] = (Path("/proc/sys") / key).read_text().strip()
        self.tables = _nft_tables()
        self.absent = [Path(p) for p in HOST_PATHS if not Path(p).exists()]

    @staticmethod
    def set(key: str, value: str) -> None:
        """Write one setting (``net/ipv4/ip_forward``, ...)."""
        (Path("/proc/sys") / key).write_text(value)

    def restore(self) -> None:
        """Write back every remembered value that differs now."""
        for key, value in self.saved.items():
            path = Path("/proc/sys") / key
            with contextlib.suppress(OSError):
                if path.read_text().strip() != value:
                    path.write_text(value)
        for table in sorted(_nft_tables() - self.tables):
            words = table.split()  # "table ip filter"
            lines = [line.strip() for line in sh(["nft", "list", *words]).splitlines()]
            rules = [x for x in lines if x and not x.startswith(("table", "chain", "type", "}"))]
            if not rules and all("policy accept" in x for x in lines if x.startswith("type")):
                sh(["nft", "delete", *words])
        for path in self.absent:
            shutil.rmtree(path, ignore_errors=True)
