"""A real Kubernetes node joined to an API server: containerd, kubelet, kube-proxy, CoreDNS.

Standard library only (plus ``provingground.process``, itself standard library), so the GPU
machine's flow (``benchmarks/gpu/node/node.py``) runs the same code. ``RealNode.start()``:

1. takes the host-wide lock (``host.HostLock``) and removes what a killed run left behind;
2. writes every configuration under ``root`` (a fresh folder per run);
3. starts containerd, imports the pause image and the given OCI archives;
4. starts kubelet (client certificate ``system:node:<name>``) and waits for the Node Ready;
5. with ``spec.services``: kube-proxy (iptables mode) and CoreDNS as host processes, the
   ``kube-dns`` Service at ``spec.dns_ip`` pointing at CoreDNS (an EndpointSlice to the node's
   address), and waits until both answer;
6. with ``dra``: the DRA GPU plugin (``dra.py``), the DeviceClass ``gpu.nvidia.com``, and waits
   for the node's ResourceSlice. Claims' CDI specs go to ``cdi_dir``, which containerd reads.

``stop()`` stops them in reverse and removes what the node made (``cleanup.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from provingground.process import ComponentError, Process

from . import cleanup, configs, dns, dra, host, ociimage
from .configs import NodeSpec
from .dra import DraPlugin

__all__ = ["ClientCert", "RealNode"]

ClientCert = tuple[Path, Path]
_LINKS = {"k8s": ("kubelet", "kube-proxy", "kubectl"), "containerd": ("ctr",)}
_NO_PROXY = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


class RealNode:
    """One real node on this host, joined to the API server at ``server``.

    ``kubelet_cert`` must be a client certificate of ``system:node:<spec.name>`` in group
    ``system:nodes``; ``proxy_cert`` one of ``system:kube-proxy`` (needed with
    ``spec.services``). ``admin_kubeconfig`` makes the ``kube-dns`` objects and is CoreDNS's.
    """

    def __init__(
        self,
        root: Path,
        bin_dir: Path,
        *,
        server: str,
        ca: Path,
        kubelet_cert: ClientCert,
        admin_kubeconfig: Path,
        address: str,
        proxy_cert: ClientCert | None = None,
        spec: NodeSpec | None = None,
        images: Sequence[Path] = (),
        start_timeout: float = 180.0,
        dra: DraPlugin | None = None,
    ) -> None:
        self.root = root.resolve()
        self.src_bin = bin_dir.resolve()
        self.bin = self.root / "bin"
        self.logs = self.root / "logs"
        self.server, self.ca, self.address = server, ca, address
        self.kubelet_cert, self.proxy_cert = kubelet_cert, proxy_cert
        self.admin_kubeconfig = admin_kubeconfig
        self.spec = spec or NodeSpec()
        self.images = list(images)
        self.start_timeout = start_timeout
        self.dra = dra
        self.cdi_dir = self.root / "cdi"
        self.sock = self.root / "run/containerd/containerd.sock"
        self.processes: dict[str, Process] = {}
        self.timings: dict[str, float] = {}
        self.facts: dict[str, Any] = {}
        self.lock = host.HostLock()
        self.sysctls = host.Sysctls()
        self.env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}",
            **_NO_PROXY,
        }

    @property
    def name(self) -> str:
        """The Node's name."""
        return self.spec.name

    @property
    def kubelet_root(self) -> Path:
        """The ``--root-dir`` of kubelet (pods' volumes, the device plugins' sockets)."""
        return Path(self.spec.kubelet_root) if self.spec.kubelet_root else self.root / "kubelet"

    # -- public helpers ---------------------------------------------------------------------

    def kubectl(
        self, *args: str, check: bool = True, timeout: float = 60, input: str | None = None
    ) -> str:
        """Kubectl (the node's own, same version) as the admin; stdout, or raise with stderr."""
        proc = subprocess.run(
            [str(self.bin / "kubectl"), f"--kubeconfig={self.admin_kubeconfig}", *args],
            capture_output=True,
            input=input,
            text=True,
            timeout=timeout,
            env=self.env,
            check=False,
        )
        if check and proc.returncode:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()[-1500:]}")
        return proc.stdout

    def ctr(self, *args: str, timeout: float = 300) -> str:
        """``ctr`` in the CRI's namespace ``k8s.io``; stdout and stderr."""
        return host.sh(
            [str(self.bin / "ctr"), "-a", str(self.sock), "-n", "k8s.io", *args], timeout=timeout
        )

    def import_images(self, archives: Sequence[Path]) -> list[str]:
        """Import OCI image archives for the CRI (``ctr images import``); return image names."""
        for archive in archives:
            # ctr's exit status is the verdict: its progress lines are not a promise (one run
            # printed only containerd's cgroup v1 warning for an archive it was importing).
            cmd = [str(self.bin / "ctr"), "-a", str(self.sock), "-n", "k8s.io", "images", "import"]
            try:
                host.sh([*cmd, "--platform", "linux/amd64", str(archive)], timeout=300, check=True)
            except RuntimeError as exc:
                raise ComponentError(f"Importing {archive} failed: {exc}") from exc
        return self.ctr("images", "ls", "-q").split()

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> RealNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> RealNode:
        """Lock the host, start every component, wait until the node is Ready (see module)."""
        t0 = time.monotonic()
        self.processes, self.timings = {}, {}
        self.timings["host lock waited"] = self.lock.acquire()
        try:
            cleanup.host_leftovers(self.spec, self.src_bin)
            self.sysctls.save()
            self._prepare()
            self._containerd()
            self.timings["containerd ready"] = time.monotonic() - t0
            self.import_images([self._pause_image(), *self.images])
            self.timings["images imported"] = time.monotonic() - t0
            self._kubelet()
            self.timings["node ready"] = time.monotonic() - t0
            if self.spec.services:
                self._services()
                self.timings["services ready"] = time.monotonic() - t0
            if self.dra is not None:
                self.start_dra(self.dra)
                self.timings["dra plugin ready"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def start_dra(self, plugin: DraPlugin) -> None:
        """Start the DRA GPU plugin on this running node; wait for its ResourceSlice."""
        dra.start(self, plugin)

    def stop_dra(self) -> None:
        """Stop the DRA GPU plugin (a later ``start()`` no longer starts it)."""
        dra.stop(self)

    def resource_slices(self) -> list[dict[str, Any]]:
        """The ResourceSlices of driver ``gpu.nvidia.com`` for this node."""
        return dra.node_slices(self)

    def stop(self) -> None:
        """Stop containers and components, remove the node's host state; safe to call twice."""
        if not self.lock.held:
            return
        try:
            cleanup.stop_node(self)
        finally:
            self.sysctls.restore()
            self.lock.release()

    # -- steps ------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = Process(name, argv, self.logs / f"{name}.log", env=self.env, cwd=self.root)
        self.processes[name] = proc
        cleanup.record(self)
        return proc

    def _wait(self, proc: Process, probe: Callable[[], bool], what: str) -> None:
        proc.wait_until(probe, self.start_timeout, what, interval=0.2)

    def _prepare(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        for sub in (
            "bin",
            "logs",
            "etc/cni/net.d",
            "run",
            "containerd",
            "images",
            "kubelet",
            "cdi",
        ):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for src in self.src_bin.iterdir():
            if src.is_file():
                _link(src, self.bin / src.name)
        for multi, names in _LINKS.items():
            for name in names:
                _link(self.src_bin / multi, self.bin / name)
        self.facts = {
            "cgroup": host.cgroup_version(),
            "oom_score_adj_lowerable": host.can_lower_oom_score_adj(),
            "address": self.address,
        }
        host.Sysctls.set("net/ipv4/ip_forward", "1")  # pods' traffic is routed by the bridge

    def _pause_image(self) -> Path:
        rootfs = self.root / "images/pause-rootfs"
        rootfs.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.src_bin / "pause", rootfs / "pause")
        out = self.root / "images/pause.tar"
        ociimage.build(rootfs, configs.PAUSE_IMAGE, out, entrypoint=["/pause"])
        return out

    def _containerd(self) -> None:
        state = self.root / "containerd"
        if host.sh(["stat", "-f", "-c", "%T", str(state)]) == "overlayfs":
            # overlayfs cannot be the upper layer of overlayfs: a tmpfs for the snapshots.
            host.sh(["mount", "-t", "tmpfs", "tmpfs", str(state)], check=True)
        cni = self.root / "etc/cni/net.d"
        (cni / "10-node.conflist").write_text(
            json.dumps(configs.cni_conflist(self.root, self.spec), indent=1)
        )
        cfg = self.root / "etc/containerd.toml"
        restrict = not self.facts["oom_score_adj_lowerable"]
        cfg.write_text(
            configs.containerd_config(self.root, self.bin, cni, self.spec, restrict_oom=restrict)
        )
        proc = self._spawn("containerd", [str(self.bin / "containerd"), "--config", str(cfg)])
        ctr = [str(self.bin / "ctr"), "-a", str(self.sock), "version"]
        self._wait(proc, lambda: "Server:" in host.sh(ctr, timeout=10), "ready (ctr version)")

    def _kubeconfig(self, name: str, cert: ClientCert) -> Path:
        path = self.root / f"etc/{name}.kubeconfig"
        path.write_text(configs.kubeconfig(self.server, self.ca, *cert))
        return path

    def _kubelet(self) -> None:
        v1 = self.spec.cgroup_v1
        cgroup_v1 = self.facts["cgroup"] == 1 if v1 is None else v1
        cfg = self.root / "etc/kubelet.json"
        config = configs.kubelet_config(self.root, self.ca, self.spec, cgroup_v1=cgroup_v1)
        cfg.write_text(json.dumps(config, indent=1))
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.spec.labels.items()))
        proc = self._spawn(
            "kubelet",
            [
                str(self.bin / "kubelet"),
                f"--config={cfg}",
                f"--kubeconfig={self._kubeconfig('kubelet', self.kubelet_cert)}",
                f"--root-dir={self.kubelet_root}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.address}",
                *([f"--node-labels={labels}"] if labels else []),
                "--v=2",
            ],
        )
        self._wait(proc, self.ready, f"Ready (Node {self.name})")

    def ready(self) -> bool:
        """Whether the Node's Ready condition is True."""
        out = self.kubectl("get", "node", self.name, "-o", "json", check=False, timeout=15)
        if not out:
            return False
        conditions = json.loads(out).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _services(self) -> None:
        if self.proxy_cert is None:
            raise ValueError("spec.services needs proxy_cert (system:kube-proxy)")
        dns.start_kube_proxy(self)
        dns.start_coredns(self)


def _link(src: Path, dst: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
