"""Make the dask image for the GPU node from this machine's own userland (no registry, no builder).

Standard library only; run on the GPU machine (benchmarks/gpu/node/README.md):

    python3 image.py --out dask.tar --wheels WHEELS [--python /usr/bin/python3]

The root filesystem holds: the system Python (binary, standard library, and the shared libraries
``ldd`` names for it, its extension modules and a few tools: ``sh``, ``env``, ``cat``, ``ls``,
``sleep``, ``ldconfig``), the Dask wheels unpacked into ``/usr/local/lib/pythonX.Y/dist-packages``,
``dask-scheduler``/``dask`` launchers and ``gpu-entrypoint``. No NVIDIA driver file is copied (the
build refuses any): ``libcuda.so.1``, ``libnvidia-ml.so.1`` and ``nvidia-smi`` must come from the
container runtime's CDI injection, as in a real CUDA image. ``ldconfig -r`` writes the image's
own ``/etc/ld.so.cache``. The archive is written by ``provingground/node/ociimage.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
NAME = "localhost/gpunode/dask:local"
PROBE_NAME = "localhost/gpunode/dask-gpu-parity-probe:local"  # operators.py's policy names it
TOOLS = ("sh", "env", "cat", "ls", "sed", "sleep", "true", "id", "ldconfig", "ldconfig.real")
DLOPENED = (  # loaded by name at run time (glibc's NSS and pthread_exit, old link names)
    "libgcc_s.so.1",
    "libnss_files.so.2",
    "libnss_dns.so.2",
    "libresolv.so.2",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libstdc++.so.6",  # the C++ runtime and OpenMP: NumPy's and CuPy's extensions need them
    "libgomp.so.1",
)
DRIVER_FILES = re.compile(
    r"(libcuda\.so|libcudadebugger|libnvidia-|libnvcuvid|libnvoptix|nvidia-smi)"
)
SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip"}
LAUNCHER = """#!/usr/bin/python3
# The console script distributed no longer installs ({module}:main); RAPIDS' examples run it.
# The __main__ guard matters: the nanny starts the worker with multiprocessing's spawn, which
# imports this file again.
import sys
from {module} import main
if __name__ == "__main__":
    sys.exit(main())
"""


def _ociimage() -> ModuleType:
    path = REPO / "provingground" / "node" / "ociimage.py"
    spec = importlib.util.spec_from_file_location("ociimage", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Rootfs:
    """A root filesystem assembled from host paths, links kept, merged-/usr layout copied."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.copied: set[str] = set()
        root.mkdir(parents=True)
        for top in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            host = Path("/") / top
            if host.is_symlink():
                (root / top).symlink_to(os.readlink(host))
        for sub in ("usr/bin", "usr/sbin", "usr/lib", "etc", "proc", "sys", "dev", "run", "root"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        for tmp in ("tmp", "var/tmp"):
            (root / tmp).mkdir(parents=True, exist_ok=True)
            (root / tmp).chmod(0o1777)

    def _dest(self, path: str) -> tuple[str, Path]:
        parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        host = os.path.join(parent, os.path.basename(path))
        return host, self.root / host.lstrip("/")

    def add(self, path: str, *, ignore: set[str] | None = None) -> None:
        """Copy ``path`` (file, link and its target, or folder) to the same place in the root."""
        host, dest = self._dest(path)
        if host in self.copied or not os.path.lexists(host):
            return
        self.copied.add(host)
        if DRIVER_FILES.search(os.path.basename(host)):
            raise RuntimeError(f"refusing to copy NVIDIA driver file {host} into the image")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(host):
            link = os.readlink(host)
            if not os.path.lexists(dest):
                dest.symlink_to(link)
            self.add(link if link.startswith("/") else os.path.join(os.path.dirname(host), link))
        elif os.path.isdir(host):
            skip = ignore or set()
            shutil.copytree(
                host,
                dest,
                symlinks=True,
                dirs_exist_ok=True,
                ignore=lambda _d, names: [n for n in names if n in skip],
            )
        else:
            shutil.copy2(host, dest)

    def add_elf(self, path: str) -> None:
        """Copy ``path`` and every shared library ``ldd`` resolves for it."""
        self.add(path)
        proc = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
        for line in proc.stdout.splitlines():
            match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
            if match:
                self.add(match.group(1))


def _python_paths(python: str) -> dict[str, str]:
    code = "import json,sys,sysconfig;print(json.dumps({**sysconfig.get_paths(),'v':sys.version}))"
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, check=True)
    paths: dict[str, str] = json.loads(out.stdout)
    return paths


def _unpack_wheels(wheels: Path, site: Path) -> list[str]:
    names = []
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            for member in zf.namelist():
                if ".data/" in member.split("/", 1)[0] + "/":
                    continue  # scripts and headers: not needed
                zf.extract(member, site)
        names.append(wheel.name)
    return names


def build(out: Path, wheels: Path, python: str, extra_env: Sequence[str] = ()) -> dict[str, object]:
    """Assemble the root filesystem and write the OCI archive ``out``."""
    python = os.path.realpath(shutil.which(python) or python)
    paths = _python_paths(python)
    version = re.sub(r"^python", "", os.path.basename(python))  # e.g. 3.12
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        fs = Rootfs(Path(tmp) / "rootfs")
        fs.add_elf(python)
        bindir = os.path.dirname(python)
        for alias in ("python3", "python"):
            link = fs.root / bindir.lstrip("/") / alias
            if not os.path.lexists(link):
                link.symlink_to(os.path.basename(python))
        fs.add(paths["stdlib"], ignore=SKIP_STDLIB)
        dynload = Path(paths["platstdlib"]) / "lib-dynload"
        for ext in sorted(dynload.glob("*.so")):
            fs.add_elf(str(ext))
        # glibc dlopens libgcc_s.so.1 for pthread_exit/cancel (Python threads at exit): no ELF
        # names it, so ldd does not find it.
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False)
        for lib in DLOPENED:
            found = re.search(rf"\s{re.escape(lib)} \(libc6,x86-64\) => (\S+)", cache.stdout)
            if found:
                fs.add(found.group(1))
        for tool in TOOLS:
            where = shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin")
            if where:
                fs.add_elf(where)
        etc_python = f"/etc/python{version}"
        for etc in (
            "/etc/passwd",
            "/etc/group",
            "/etc/nsswitch.conf",
            "/etc/ld.so.conf",
            "/etc/ld.so.conf.d",
            etc_python,
        ):
            fs.add(etc)
        site = fs.root / f"usr/local/lib/python{version}/dist-packages"
        site.mkdir(parents=True, exist_ok=True)
        installed = _unpack_wheels(wheels, site)
        for ext in sorted(site.rglob("*.so")):  # the wheels' extensions need host libraries too
            proc = subprocess.run(["ldd", str(ext)], capture_output=True, text=True, check=False)
            for line in proc.stdout.splitlines():
                match = re.search(r"=>\s*(/\S+)\s+\(0x", line)
                if match and not str(match.group(1)).startswith(str(fs.root)):
                    fs.add(match.group(1))
        local_bin = fs.root / "usr/local/bin"
        local_bin.mkdir(parents=True, exist_ok=True)
        for name, module in (
            ("dask-scheduler", "distributed.cli.dask_scheduler"),
            ("dask-worker", "distributed.cli.dask_worker"),
            ("dask", "dask.__main__"),
        ):
            (local_bin / name).write_text(LAUNCHER.format(module=module))
            (local_bin / name).chmod(0o755)
        shutil.copy2(HERE / "gpu-entrypoint", local_bin / "gpu-entrypoint")
        (local_bin / "gpu-entrypoint").chmod(0o755)
        (fs.root / "usr/local/lib/gpunode").mkdir(parents=True)
        shutil.copy2(HERE / "gpu_uuid.py", fs.root / "usr/local/lib/gpunode/gpu_uuid.py")
        subprocess.run(["ldconfig", "-r", str(fs.root)], check=False)
        driver = [str(p) for p in fs.root.rglob("*") if DRIVER_FILES.search(p.name)]
        if driver:
            raise RuntimeError(f"NVIDIA driver files in the image: {driver}")
        size = sum(p.lstat().st_size for p in fs.root.rglob("*"))
        facts = _ociimage().build(
            fs.root,
            NAME,
            out,
            entrypoint=["/usr/local/bin/gpu-entrypoint"],
            env=[
                # As NVIDIA's CUDA images: CDI mounts nvidia-smi into /usr/local/nvidia/bin.
                "PATH=/usr/local/nvidia/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                f"CUDA_VERSION={os.environ.get('CUDA_VERSION', '13.0')}",
                *extra_env,
            ],
        )
    return {
        **facts,
        "python": python,
        "python_version": paths["v"],
        "rootfs_bytes": size,
        "wheels": installed,
        "files": len(fs.copied),
    }


def build_probe(out: Path, name: str) -> dict[str, object]:
    """The probe image, as the Dockerfile's ``probe`` stage: ``cp`` and ``/probe.py``.

    ``cp`` is this machine's, with the libraries ``ldd`` names (the Dockerfile uses busybox's);
    the ``gpu-parity-probe`` init container runs ``cp /probe.py /gpu-parity/probe.py``.
    """
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        fs = Rootfs(Path(tmp) / "rootfs")
        fs.add_elf(os.path.realpath(shutil.which("cp") or "/bin/cp"))
        probe = fs.root / "probe.py"
        shutil.copy2(REPO / "operator/dask_gpu_parity/probe.py", probe)
        probe.chmod(0o644)
        facts = _ociimage().build(
            fs.root, name, out, entrypoint=[], cmd=["cp", "/probe.py", "/gpu-parity/probe.py"]
        )
    return {**facts, "files": len(fs.copied)}


def main() -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--wheels", type=Path, required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="more image environment (the RAPIDS images' NVIDIA_VISIBLE_DEVICES=all)",
    )
    parser.add_argument("--probe-out", type=Path, help="also the probe image, to this file")
    args = parser.parse_args()
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    facts = build(out, args.wheels, args.python, args.env)
    if args.probe_out:
        facts["probe_image"] = build_probe(args.probe_out.resolve(), PROBE_NAME)
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
