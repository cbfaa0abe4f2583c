"""The probe's test harness: fake driver libraries built with gcc, fake rmm and CuPy modules.

The probe runs in a fresh process, as the pod runs it (`python -I probe.py`), with
LD_LIBRARY_PATH pointing at a folder of fake `libcuda.so.1` / `libnvidia-ml.so.1` whose behaviour
FAKE_* variables choose (see tests/unit/probe/fakecuda/*.c and the modules below).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dask_gpu_parity import probe

PROBE = Path(probe.__file__).resolve()
FAKES = Path(__file__).parent / "fakecuda"
UUID = "GPU-8f3c1e22-5a6b-4c7d-9e0f-102132435465"
CHECKS = list(probe.CHECKS)

FAKE_RMM = """
import os
class DeviceBuffer:
    def __init__(self, size):
        if os.environ.get("FAKE_RMM_ERROR"):
            raise RuntimeError("CUDA error at: /rmm/include/rmm/cuda_device.hpp:56: "
                               "cudaErrorNoDevice no CUDA-capable device is detected\\nmore")
"""
FAKE_CUPY = """
import os, pathlib, time
if os.environ.get("FAKE_CUPY_IMPORT_ERROR"):
    raise ImportError("libnvrtc.so.13: cannot open shared object file: No such file or directory")
if os.environ.get("FAKE_RENDEZVOUS"):  # see fakecuda.c: meet cuInit while it runs
    folder = pathlib.Path(os.environ["FAKE_RENDEZVOUS"])
    (folder / "import").touch()
    deadline = time.monotonic() + 5
    while not (folder / "cuinit").exists():
        if time.monotonic() > deadline:
            raise ImportError("cuInit did not run while CuPy was imported")
        time.sleep(0.001)
class _Array:
    def get(self):
        return [0.0]
def zeros(n):
    if os.environ.get("FAKE_CUPY_ERROR"):
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    return _Array()
"""


@dataclass(frozen=True)
class Fakes:
    libs: dict[str, Path]
    modules: Path


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """No driver library loads in this process: ``ctypes.CDLL`` fails as on a node without one."""

    def no_library(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(probe.ctypes, "CDLL", no_library)


@pytest.fixture(scope="session")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Fakes:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the fake driver libraries cannot be built")
    root = tmp_path_factory.mktemp("fakecuda")
    builds = {
        "ok": {"libcuda.so.1": [], "libnvidia-ml.so.1": []},
        "no-nvml": {"libcuda.so.1": []},
        "none": {},
        "broken": {"libcuda.so.1": ["-DOMIT_UUID"], "libnvidia-ml.so.1": []},
    }
    sources = {"libcuda.so.1": FAKES / "fakecuda.c", "libnvidia-ml.so.1": FAKES / "fakenvml.c"}
    libs = {}
    for name, wanted in builds.items():
        folder = root / name
        folder.mkdir()
        for lib, flags in wanted.items():
            cmd = [gcc, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *flags]
            subprocess.run([*cmd, "-o", str(folder / lib), str(sources[lib])], check=True)
        libs[name] = folder
    modules = root / "modules"
    for name, source in {"rmm": FAKE_RMM, "cupy": FAKE_CUPY}.items():
        (modules / name).mkdir(parents=True)
        (modules / name / "__init__.py").write_text(source)
    return Fakes(libs, modules)


@dataclass(frozen=True)
class Run:
    code: int
    summary: dict[str, Any]
    stderr: str
    termination: str

    def results(self) -> dict[str, str]:
        return {c["name"]: c["result"] for c in self.summary["checks"]}


def run_probe(
    fakes: Fakes,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    *,
    libs: str = "ok",
    form: str = "file",
    args: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> Run:
    log = tmp_path / "termination-log"
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LD_LIBRARY_PATH": str(fakes.libs[libs]),
        "CUDA_VERSION": "13.0.1",
        "GPU_PARITY_TERMINATION_LOG": str(log),
        **(env or {}),
    }
    full = {k: v for k, v in full.items() if v is not None}
    if form == "file":
        cmd = [sys.executable, "-I", str(PROBE), *args]
    elif form == "c":
        cmd = [sys.executable, "-I", "-c", PROBE.read_text(), *args]
    else:  # "modules": the fake rmm and cupy are importable
        boot = f"import sys, runpy; sys.path.insert(0, {str(fakes.modules)!r}); "
        boot += f"runpy.run_path({str(PROBE)!r}, run_name='__main__')"
        cmd = [sys.executable, "-I", "-c", boot, *args]
    done = subprocess.run(
        cmd, env=full, capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )
    lines = done.stdout.splitlines()
    summary = json.loads(lines[0]) if lines else {}
    assert len(lines) <= 1, done.stdout
    termination = log.read_text() if log.exists() else ""
    return Run(done.returncode, summary, done.stderr, termination)
