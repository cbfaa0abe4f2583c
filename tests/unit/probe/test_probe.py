"""The init-container probe against fake driver libraries built here with gcc.

Each test runs the probe in a fresh process, as the pod does (`python -I probe.py`), with
LD_LIBRARY_PATH pointing at a folder of fake `libcuda.so.1` / `libnvidia-ml.so.1` whose behaviour
FAKE_* variables choose (see tests/unit/probe/fakecuda/*.c).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dask_gpu_parity import probe

from .harness import CHECKS, PROBE, UUID, Fakes, run_probe


def test_success_summary_and_termination_message(fakes: Fakes, tmp_path: Path) -> None:
    run = run_probe(fakes, tmp_path)
    assert run.code == 0, run.stderr
    s = run.summary
    assert s["ok"] is True
    assert s["failed_check"] is None
    assert s["reason"] is None
    assert s["device"] == "Fake H200"
    assert s["uuid"] == UUID
    assert s["driver_version"] == "580.159.04"
    assert s["cuda_driver_version"] == "13.0"
    assert s["image_cuda_version"] == "13.0.1"
    assert s["compute_capability"] == "9.0"
    assert s["memory_total_mib"] == 143771
    assert s["memory_free_mib"] == 143000
    assert s["nvml_gpu_count"] == 1
    assert s["cuda_device_count"] == 1
    assert s["wall_ms"] >= 0
    assert [c["name"] for c in s["checks"]] == CHECKS
    assert all(isinstance(c["duration_ms"], float) for c in s["checks"])
    assert run.results() == {
        **dict.fromkeys(CHECKS, "pass"),
        "device-uuids": "skip",
        "driver-version": "skip",
        "free-memory": "skip",
        "rmm": "skip",
        "cupy": "skip",
    }
    assert run.stderr == ""
    assert run.termination == (
        f"GPU ok: Fake H200 {UUID}, driver 580.159.04, CUDA 13.0, compute capability 9.0\n"
    )


def test_source_runs_as_python_dash_c(fakes: Fakes, tmp_path: Path) -> None:
    """The injected init container runs `python -I -c <source of probe.py>`."""
    ok = run_probe(fakes, tmp_path, form="c")
    assert ok.code == 0, ok.stderr
    assert ok.summary["uuid"] == UUID
    failed = run_probe(fakes, tmp_path, {"CUDA_VISIBLE_DEVICES": ""}, form="c")
    assert failed.code == 1
    assert failed.summary["failed_check"] == "visible-devices"


@pytest.mark.parametrize(
    ("env", "results"),
    [
        ({"GPU_PARITY_EXPECT_DRIVER": "580.159.04"}, {"driver-version": "pass"}),
        ({"GPU_PARITY_EXPECT_DRIVER": "580.159.4"}, {"driver-version": "pass"}),
        ({"CUDA_VERSION": None}, {"cuda-version": "skip", "compute-capability": "skip"}),
        ({"CUDA_VERSION": "11.8.0"}, {"cuda-version": "pass", "compute-capability": "skip"}),
        ({"CUDA_VISIBLE_DEVICES": "0"}, {"device-uuids": "skip"}),
        ({"CUDA_VISIBLE_DEVICES": "GPU-8f3c1e22"}, {"device-uuids": "pass"}),
        ({"CUDA_VISIBLE_DEVICES": UUID}, {"device-uuids": "pass"}),
        ({"NVIDIA_VISIBLE_DEVICES": "void"}, {"visible-devices": "pass"}),
        ({"GPU_PARITY_MIN_FREE_MEMORY_MIB": "1024"}, {"free-memory": "pass"}),
        ({"FAKE_CC_MAJOR": "7", "FAKE_CC_MINOR": "5"}, {"compute-capability": "pass"}),
        ({"FAKE_NVML_MIG": "1"}, {"cuda-devices": "pass"}),
    ],
    ids=[
        "expected-driver-matches",
        "expected-driver-as-dra-devices-spell-it",
        "no-cuda-version-in-image",
        "cuda-major-without-rapids-minimum",
        "visible-devices-ordinal",
        "visible-devices-uuid-prefix",
        "visible-devices-full-uuid",
        "nvidia-visible-devices-void-as-cdi-sets-it",
        "enough-free-memory",
        "turing-on-cuda-13",
        "mig-mode-reported-only",
    ],
)
def test_passing_variants(
    fakes: Fakes, tmp_path: Path, env: dict[str, str], results: dict[str, str]
) -> None:
    run = run_probe(fakes, tmp_path, env)
    assert run.code == 0, run.stderr
    assert run.results().items() >= results.items()


def test_without_nvml_cuda_still_decides(fakes: Fakes, tmp_path: Path) -> None:
    run = run_probe(fakes, tmp_path, libs="no-nvml")
    assert run.code == 0, run.stderr
    assert "libnvidia-ml.so.1 not loadable" in run.summary["nvml"]
    assert run.results()["gpu-health"] == "skip"
    assert "driver ?" in run.termination


def test_rmm_and_cupy_are_exercised_when_importable(fakes: Fakes, tmp_path: Path) -> None:
    run = run_probe(fakes, tmp_path, form="modules")
    assert run.code == 0, run.stderr
    assert run.results()["rmm"] == "pass"
    assert run.results()["cupy"] == "pass"


NO_DEVICE = "Expected at least one CUDA device, found none ("
NO_DEVICE_TAIL = (
    "): give the scheduler container the workers' GPU resource and do not hide it with "
    "CUDA_VISIBLE_DEVICES"
)

FAILURES = [
    # id, env, libs, form, failed check, the whole message or a part of it
    (
        "cuda-visible-devices-empty",
        {"CUDA_VISIBLE_DEVICES": ""},
        "ok",
        "file",
        "visible-devices",
        'Expected CUDA_VISIBLE_DEVICES unset or naming a GPU, found "", which hides every GPU from '
        "CUDA while NVML and nvidia-smi still show them: remove it from the scheduler "
        "container's env",
    ),
    (
        "cuda-visible-devices-minus-one",
        {"CUDA_VISIBLE_DEVICES": "-1"},
        "ok",
        "file",
        "visible-devices",
        'found "-1", which hides every GPU',
    ),
    (
        "cuda-visible-devices-nodevfiles",
        {"CUDA_VISIBLE_DEVICES": "NoDevFiles"},
        "ok",
        "file",
        "visible-devices",
        'found "NoDevFiles", which hides every GPU',
    ),
    (
        "cuda-visible-devices-malformed",
        {"CUDA_VISIBLE_DEVICES": "0,gpu1"},
        "ok",
        "file",
        "visible-devices",
        "Expected CUDA_VISIBLE_DEVICES to list device indices or GPU-/MIG- UUIDs, found "
        '"0,gpu1" with entry "gpu1", which hides that GPU and all after it: fix or remove '
        "CUDA_VISIBLE_DEVICES",
    ),
    (
        "nvidia-visible-devices-none",
        {"NVIDIA_VISIBLE_DEVICES": "none"},
        "ok",
        "file",
        "visible-devices",
        'Expected NVIDIA_VISIBLE_DEVICES to name the allocated GPU, found "none", so the '
        "container runtime mounts no GPU: remove it and request the workers' GPU resource",
    ),
    (
        "no-libcuda",
        {},
        "none",
        "file",
        "libraries",
        "Expected the NVIDIA driver's libcuda.so.1 in the container, found none (libcuda.so.1: "
        "cannot open shared object file: No such file or directory): request the workers' GPU "
        "resource (nvidia.com/gpu or a MIG resource), set the workers' runtimeClassName, and "
        "keep compute in NVIDIA_DRIVER_CAPABILITIES",
    ),
    (
        "nvml-rm-version-mismatch",
        {"FAKE_NVML_INIT_ERROR": "18"},
        "ok",
        "file",
        "libraries",
        "Expected nvmlInit to succeed, it returned 18 RM has detected an NVML/RM version "
        "mismatch.: the driver was upgraded without a reboot: drain and reboot the node",
    ),
    (
        "nvml-driver-not-loaded",
        {"FAKE_NVML_INIT_ERROR": "9"},
        "ok",
        "file",
        "libraries",
        "it returned 9 Driver Not Loaded: the NVIDIA kernel driver is not loaded on this node",
    ),
    (
        "nvml-other-error",
        {"FAKE_NVML_INIT_ERROR": "999"},
        "ok",
        "file",
        "libraries",
        "it returned 999 Unknown Error: check the node's driver with nvidia-smi",
    ),
    (
        "unknown-uuid",
        {"CUDA_VISIBLE_DEVICES": "GPU-deadbeef"},
        "ok",
        "file",
        "device-uuids",
        "Expected CUDA_VISIBLE_DEVICES to name a GPU of this container, found GPU-deadbeef, not "
        f"among {UUID}: remove CUDA_VISIBLE_DEVICES (the device plugin already picks the GPU)",
    ),
    (
        "bad-ordinal-nvml-still-sees-gpu",
        {"CUDA_VISIBLE_DEVICES": "7"},
        "ok",
        "file",
        "cuda-init",
        f"{NO_DEVICE}cuInit returned 100 CUDA_ERROR_NO_DEVICE: no CUDA-capable device is "
        'detected; CUDA_VISIBLE_DEVICES="7"; NVML still sees 1 GPU(s)' + NO_DEVICE_TAIL,
    ),
    (
        "cuinit-no-device-void",
        {"FAKE_CUDA_INIT_ERROR": "100", "NVIDIA_VISIBLE_DEVICES": "void"},
        "ok",
        "file",
        "cuda-init",
        f"{NO_DEVICE}cuInit returned 100 CUDA_ERROR_NO_DEVICE: no CUDA-capable device is "
        'detected; NVIDIA_VISIBLE_DEVICES="void"; NVML still sees 1 GPU(s)' + NO_DEVICE_TAIL,
    ),
    (
        "cuinit-driver-mismatch",
        {"FAKE_CUDA_INIT_ERROR": "803"},
        "ok",
        "file",
        "cuda-init",
        "Expected cuInit to succeed on the GPU, cuInit returned 803 "
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has unsupported display driver / cuda driver "
        "combination: the driver's libraries do not match its kernel module: reboot or repair "
        "the node",
    ),
    (
        "cuinit-unknown-error",
        {"FAKE_CUDA_INIT_ERROR": "999"},
        "ok",
        "file",
        "cuda-init",
        "cuInit returned 999 CUDA_ERROR_UNKNOWN: unknown error: check the node with nvidia-smi "
        "and its kernel log (Xid)",
    ),
    (
        "zero-cuda-devices",
        {"FAKE_CUDA_DEVICE_COUNT": "0"},
        "ok",
        "file",
        "cuda-devices",
        f"{NO_DEVICE}cuDeviceGetCount returned 0; NVML still sees 1 GPU(s){NO_DEVICE_TAIL}",
    ),
    (
        "zero-cuda-devices-mig-on",
        {"FAKE_CUDA_DEVICE_COUNT": "0", "FAKE_NVML_MIG": "1"},
        "ok",
        "file",
        "cuda-devices",
        "NVML still sees 1 GPU(s); MIG mode is on, so only MIG devices can run CUDA",
    ),
    (
        "wrong-driver",
        {"GPU_PARITY_EXPECT_DRIVER": "570.86.15"},
        "ok",
        "file",
        "driver-version",
        "Expected NVIDIA driver 570.86.15 (the workers'), found 580.159.04: run the scheduler on "
        "nodes labelled nvidia.com/cuda.driver-version.full=570.86.15",
    ),
    (  # a DRA device's spelling (580.159.4 is 580.159.04), of another version
        "wrong-driver-in-dra-spelling",
        {"GPU_PARITY_EXPECT_DRIVER": "580.159.40"},
        "ok",
        "file",
        "driver-version",
        "Expected NVIDIA driver 580.159.40 (the workers'), found 580.159.04: run the scheduler on "
        "nodes labelled nvidia.com/cuda.driver-version.full=580.159.40",
    ),
    (
        "expected-driver-without-nvml",
        {"GPU_PARITY_EXPECT_DRIVER": "580.159.04"},
        "no-nvml",
        "file",
        "driver-version",
        "Expected NVIDIA driver 580.159.04, could not read the driver version: "
        "libnvidia-ml.so.1 not loadable (libnvidia-ml.so.1: cannot open shared object file: No "
        "such file or directory): add utility to NVIDIA_DRIVER_CAPABILITIES",
    ),
    (
        "old-cuda-driver",
        {"FAKE_CUDA_DRIVER_VERSION": "12040", "CUDA_VERSION": "12.8.0"},
        "ok",
        "file",
        "cuda-version",
        "Expected a driver that supports CUDA 12.8 (CUDA_VERSION=12.8.0), found one that "
        "supports CUDA 12.4: run the scheduler on nodes with the workers' driver, or use an "
        "image built for this driver's CUDA",
    ),
    (
        # A blank expectation is unset (Kubernetes renders `value: ""` so): the image's CUDA
        # decides, and no driver supports CUDA 99.0.
        "blank-expected-cuda-falls-back-to-image",
        {"GPU_PARITY_EXPECT_CUDA": " ", "CUDA_VERSION": "99.0"},
        "ok",
        "file",
        "cuda-version",
        "Expected a driver that supports CUDA 99.0 (CUDA_VERSION=99.0), found one that supports "
        "CUDA 13.0: run the scheduler on nodes with the workers' driver",
    ),
    (
        "empty-expected-cuda-falls-back-to-image",
        {"GPU_PARITY_EXPECT_CUDA": "", "CUDA_VERSION": "99.0"},
        "ok",
        "file",
        "cuda-version",
        "Expected a driver that supports CUDA 99.0 (CUDA_VERSION=99.0)",
    ),
    (
        "expected-cuda-overrides-image",
        {"GPU_PARITY_EXPECT_CUDA": "13.1"},
        "ok",
        "file",
        "cuda-version",
        "supports CUDA 13.1 (GPU_PARITY_EXPECT_CUDA=13.1), found one that supports CUDA 13.0",
    ),
    (
        "volta-on-cuda-13",
        {"FAKE_CC_MAJOR": "7", "FAKE_CC_MINOR": "0"},
        "ok",
        "file",
        "compute-capability",
        "Expected compute capability 7.5 or newer (RAPIDS' minimum for CUDA 13), found 7.0 on "
        "Fake H200: give the scheduler a GPU of the workers' family (node label "
        "nvidia.com/gpu.compute.major)",
    ),
    (
        "pascal-on-cuda-12",
        {"FAKE_CC_MAJOR": "6", "FAKE_CC_MINOR": "1", "CUDA_VERSION": "12.8.0"},
        "ok",
        "file",
        "compute-capability",
        "Expected compute capability 7.0 or newer (RAPIDS' minimum for CUDA 12), found 6.1",
    ),
    (
        "impossible-minimum",
        {"GPU_PARITY_MIN_COMPUTE_CAPABILITY": "99.0"},
        "ok",
        "file",
        "compute-capability",
        "Expected compute capability 99.0 or newer (GPU_PARITY_MIN_COMPUTE_CAPABILITY), found 9.0",
    ),
    (
        "context-out-of-memory",
        {"FAKE_CUDA_CTX_ERROR": "2"},
        "ok",
        "file",
        "context",
        "Expected cuDevicePrimaryCtxRetain to succeed on Fake H200, cuDevicePrimaryCtxRetain "
        "returned 2 CUDA_ERROR_OUT_OF_MEMORY: out of memory: GPU memory is full: find the process "
        "holding it (nvidia-smi on the node)",
    ),
    (
        "allocation-fails",
        {"FAKE_CUDA_ALLOC_ERROR": "2"},
        "ok",
        "file",
        "allocation",
        "Expected cuMemAlloc_v2 to succeed on Fake H200, cuMemAlloc_v2 returned 2 "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    ),
    (
        "too-little-free-memory",
        {"GPU_PARITY_MIN_FREE_MEMORY_MIB": "143001", "FAKE_CUDA_FREE_MIB": "512"},
        "ok",
        "file",
        "free-memory",
        "Expected at least 143001 MiB free on Fake H200, found 512 MiB: another process holds the "
        "GPU's memory; give the scheduler its own GPU",
    ),
    (
        "uncorrected-ecc",
        {"FAKE_NVML_ECC_UNCORRECTED": "3"},
        "ok",
        "file",
        "gpu-health",
        f"Expected no uncorrected ECC errors, found 3 on {UUID} since the driver loaded: drain "
        "the node and have the GPU checked (nvidia-smi -q -d ECC)",
    ),
    (
        "row-remap-pending",
        {"FAKE_NVML_REMAP_PENDING": "1"},
        "ok",
        "file",
        "gpu-health",
        f"Expected no pending or failed row remapping, found pending=1 failed=0 on {UUID}: reset "
        "the GPU or drain the node for service",
    ),
    (
        "rmm-no-device",
        {"FAKE_RMM_ERROR": "1"},
        "ok",
        "modules",
        "rmm",
        "Expected rmm.DeviceBuffer(size=1) to work on Fake H200, it raised RuntimeError: CUDA "
        "error at: /rmm/include/rmm/cuda_device.hpp:56: cudaErrorNoDevice no CUDA-capable device "
        "is detected: check the image's rmm build against the driver's CUDA",
    ),
    (
        "cupy-insufficient-driver",
        {"FAKE_CUPY_ERROR": "1"},
        "ok",
        "modules",
        "cupy",
        "Expected cupy.zeros(1).get() to work on Fake H200, it raised RuntimeError: "
        "cudaErrorInsufficientDriver: CUDA driver version is insufficient: check the image's "
        "cupy build against the driver's CUDA",
    ),
]


@pytest.mark.parametrize("case", [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_each_failure_is_one_line(
    fakes: Fakes, tmp_path: Path, case: tuple[dict[str, str], str, str, str, str]
) -> None:
    env, libs, form, check, message = case
    run = run_probe(fakes, tmp_path, env, libs=libs, form=form)
    assert run.code == 1, run.stderr
    reason = run.summary["reason"]
    assert message in reason
    assert reason[0].isupper()
    assert not reason.endswith(".")
    assert "\n" not in reason
    assert run.summary["ok"] is False
    assert run.summary["failed_check"] == check
    names = [c["name"] for c in run.summary["checks"]]
    assert names == CHECKS[: CHECKS.index(check) + 1]
    assert run.summary["checks"][-1]["result"] == "fail"
    assert run.stderr == reason + "\n"
    assert run.termination == reason + "\n"


def test_every_check_has_a_failure_case() -> None:
    covered = {f[4] for f in FAILURES}
    assert covered == set(CHECKS)


PROBE_ERRORS = [
    (
        "bad-minimum-compute-capability",
        {"GPU_PARITY_MIN_COMPUTE_CAPABILITY": "seven"},
        "ok",
        'gpu-parity-check could not run: GPU_PARITY_MIN_COMPUTE_CAPABILITY="seven" is not a '
        "MAJOR.MINOR version, e.g. 7.5",
    ),
    (
        "bad-cuda-version",
        {"CUDA_VERSION": "thirteen"},
        "ok",
        'gpu-parity-check could not run: CUDA_VERSION="thirteen" is not a MAJOR.MINOR version',
    ),
    (
        "bad-free-memory",
        {"GPU_PARITY_MIN_FREE_MEMORY_MIB": "1GiB"},
        "ok",
        'gpu-parity-check could not run: GPU_PARITY_MIN_FREE_MEMORY_MIB="1GiB" is not a whole '
        "number",
    ),
    (
        "bad-timeout",
        {"GPU_PARITY_TIMEOUT_S": "soon"},
        "ok",
        'gpu-parity-check could not run: GPU_PARITY_TIMEOUT_S="soon" is not a number of seconds',
    ),
    (
        "driver-library-lacks-a-symbol",
        {},
        "broken",
        "gpu-parity-check could not run (cuda-devices): AttributeError: ",
    ),
]


@pytest.mark.parametrize(
    ("env", "libs", "message"), [p[1:] for p in PROBE_ERRORS], ids=[p[0] for p in PROBE_ERRORS]
)
def test_probe_errors_exit_2_without_traceback(
    fakes: Fakes, tmp_path: Path, env: dict[str, str], libs: str, message: str
) -> None:
    run = run_probe(fakes, tmp_path, env, libs=libs)
    assert run.code == 2
    assert run.summary["reason"].startswith(message)
    assert "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1
    assert run.termination.startswith(message)


def test_hung_driver_is_bounded_by_the_timeout(fakes: Fakes, tmp_path: Path) -> None:
    env = {"FAKE_CUDA_INIT_SLEEP_MS": "20000", "GPU_PARITY_TIMEOUT_S": "1"}
    run = run_probe(fakes, tmp_path, env)
    assert run.code == 1
    message = (
        "Expected the probe to finish in 1.0 s, cuda-init was still running: the driver or GPU is "
        "not answering; check the node with nvidia-smi and its kernel log\n"
    )
    assert run.stderr == message
    assert run.termination == message


def test_flags_override_env(fakes: Fakes, tmp_path: Path) -> None:
    env = {"GPU_PARITY_EXPECT_DRIVER": "580.159.04"}
    run = run_probe(fakes, tmp_path, env, args=("--expect-driver", "1.2.3"))
    assert run.code == 1
    assert run.summary["failed_check"] == "driver-version"
    assert "Expected NVIDIA driver 1.2.3" in run.summary["reason"]


def test_unwritable_termination_log_is_ignored(fakes: Fakes, tmp_path: Path) -> None:
    env = {"GPU_PARITY_TERMINATION_LOG": str(tmp_path / "missing" / "log")}
    assert run_probe(fakes, tmp_path, env).code == 0
    assert run_probe(fakes, tmp_path, {**env, "CUDA_VISIBLE_DEVICES": "-1"}).code == 1


@pytest.mark.usefixtures("no_driver")
def test_main_in_process_without_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dask-gpu-parity verify-gpu` calls main(argv) in process."""

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    log = tmp_path / "log"
    assert probe.main(["--termination-log", str(log)]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["failed_check"] == "libraries"
    assert err.startswith("Expected the NVIDIA driver's libcuda.so.1 in the container")
    assert log.read_text() == err


def test_check_order_is_the_issues() -> None:
    assert CHECKS == [
        "visible-devices",
        "libraries",
        "device-uuids",
        "cuda-init",
        "cuda-devices",
        "driver-version",
        "cuda-version",
        "compute-capability",
        "context",
        "allocation",
        "free-memory",
        "gpu-health",
        "rmm",
        "cupy",
    ]


def test_env_vars_are_the_documented_settings() -> None:
    assert probe.ENV_VARS == (
        "GPU_PARITY_EXPECT_DRIVER",
        "GPU_PARITY_EXPECT_CUDA",
        "GPU_PARITY_MIN_COMPUTE_CAPABILITY",
        "GPU_PARITY_MIN_FREE_MEMORY_MIB",
        "GPU_PARITY_TIMEOUT_S",
        "GPU_PARITY_TERMINATION_LOG",
    )
    text = (Path(__file__).parents[3] / "docs" / "probe.md").read_text()
    assert all(f"`{name}`" in text for name in probe.ENV_VARS)
    assert all(f"| {name} |" in text or f"| `{name}` |" in text for name in probe.CHECKS)


@pytest.mark.usefixtures("no_driver")
def test_in_process_main_leaves_no_watchdog_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed in-process run must cancel its timer, or it would kill the caller later."""
    import threading

    before = {t for t in threading.enumerate() if isinstance(t, threading.Timer)}
    assert probe.main(["--termination-log", str(tmp_path / "log")]) == 1
    capsys.readouterr()
    alive = {t for t in threading.enumerate() if isinstance(t, threading.Timer) and t.is_alive()}
    leftover = alive - before
    for timer in leftover:
        timer.join(timeout=1)
    assert not [t for t in leftover if t.is_alive()]


@pytest.mark.parametrize(
    "case",
    [
        (
            [],
            {"GPU_PARITY_TIMEOUT_S": "-5"},
            'GPU_PARITY_TIMEOUT_S="-5" is not a number of seconds',
        ),
        ([], {"GPU_PARITY_TIMEOUT_S": "0"}, 'GPU_PARITY_TIMEOUT_S="0" is not a number'),
        ([], {"GPU_PARITY_TIMEOUT_S": "nan"}, 'GPU_PARITY_TIMEOUT_S="nan" is not a number'),
        ([], {"GPU_PARITY_TIMEOUT_S": "inf"}, 'GPU_PARITY_TIMEOUT_S="inf" is not a number'),
        ([], {"GPU_PARITY_TIMEOUT_S": "1e309"}, 'GPU_PARITY_TIMEOUT_S="1e309" is not a number'),
        ([], {"GPU_PARITY_EXPECT_DRIVER": "latest"}, 'GPU_PARITY_EXPECT_DRIVER="latest" is not'),
        ([], {"GPU_PARITY_EXPECT_CUDA": "13"}, 'GPU_PARITY_EXPECT_CUDA="13" is not a MAJOR.MINOR'),
        ([], {"GPU_PARITY_MIN_FREE_MEMORY_MIB": "-1"}, "is not a whole number"),
        (["--bogus"], {}, "unrecognized arguments: --bogus (see --help)"),
    ],
)
def test_settings_are_checked_first_without_a_gpu(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[list[str], dict[str, str], str],
) -> None:
    """No driver here: a bad setting is still reported as one (exit 2), never as a GPU fault."""
    argv, env, message = case

    def no_library(name: str) -> None:
        raise AssertionError(f"{name} was loaded before the settings were checked")

    monkeypatch.setattr(probe.ctypes, "CDLL", no_library)
    log = tmp_path / "log"
    for name, value in {**env, "GPU_PARITY_TERMINATION_LOG": str(log)}.items():
        monkeypatch.setenv(name, value)
    assert probe.main(argv) == 2
    out, err = capsys.readouterr()
    summary = json.loads(out)  # the JSON line is always printed
    assert summary["failed_check"] == "settings"
    assert message in summary["reason"]
    assert err.count("\n") == 1
    assert message in log.read_text()


# --- where the result goes: never blocking, never a stray file, the exit code always right ----


@pytest.mark.parametrize(
    ("env", "code"), [({}, 0), ({"CUDA_VISIBLE_DEVICES": "-1"}, 1)], ids=["ok", "check-failed"]
)
def test_a_fifo_termination_log_without_a_reader_never_blocks(
    fakes: Fakes, tmp_path: Path, env: dict[str, str], code: int
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run = run_probe(fakes, tmp_path, {**env, "GPU_PARITY_TERMINATION_LOG": str(fifo)})
    assert run.code == code
    note = f"Note: the termination log {fifo} is a FIFO without a reader: skipped it; the line "
    assert run.stderr.splitlines()[-1].startswith(note)
    assert "Traceback" not in run.stderr


def test_a_fifo_termination_log_with_a_reader_gets_the_line(fakes: Fakes, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        run = run_probe(fakes, tmp_path, {"GPU_PARITY_TERMINATION_LOG": str(fifo)})
        line = os.read(reader, 4096).decode()
    finally:
        os.close(reader)
    assert run.code == 0
    assert run.stderr == ""
    assert line.startswith(f"GPU ok: Fake H200 {UUID}")


@pytest.mark.usefixtures("no_driver")
@pytest.mark.parametrize("blank", [" ", "\t", "  \n"], ids=["space", "tab", "newline"])
def test_a_blank_termination_log_setting_counts_as_unset(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    blank: str,
) -> None:
    """Unset means the default path; no file named by whitespace is ever created."""

    default = tmp_path / "default-log"
    monkeypatch.setitem(probe._DEFAULTS, probe.ENV_TERMINATION_LOG, str(default))
    monkeypatch.setenv(probe.ENV_TERMINATION_LOG, blank)
    monkeypatch.chdir(tmp_path)
    assert probe.main([]) == 1
    _, err = capsys.readouterr()
    assert default.read_text() == err
    assert sorted(os.listdir(tmp_path)) == ["default-log"]
    assert probe.main(["--termination-log", blank]) == 1
    assert sorted(os.listdir(tmp_path)) == ["default-log"]


def test_a_blank_termination_log_flag_falls_back_to_the_env(fakes: Fakes, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run = run_probe(fakes, tmp_path, args=("--termination-log", " "), cwd=work)
    assert run.code == 0
    assert run.termination.startswith("GPU ok: ")
    assert os.listdir(work) == []


@pytest.mark.parametrize(
    "name",
    [
        "GPU_PARITY_EXPECT_DRIVER",
        "GPU_PARITY_MIN_COMPUTE_CAPABILITY",
        "GPU_PARITY_MIN_FREE_MEMORY_MIB",
        "GPU_PARITY_TIMEOUT_S",
    ],
)
def test_every_blank_setting_counts_as_unset(fakes: Fakes, tmp_path: Path, name: str) -> None:
    run = run_probe(fakes, tmp_path, {name: " "})
    assert run.code == 0, run.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({}, 0),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, 1),
        ({"GPU_PARITY_TIMEOUT_S": "soon"}, 2),
    ],
    ids=["ok", "check-failed", "probe-error"],
)
@pytest.mark.parametrize("full", ["stdout", "stdout-and-stderr"])
def test_a_full_stdout_still_exits_with_the_verdict(
    fakes: Fakes, tmp_path: Path, env: dict[str, str], code: int, full: str
) -> None:
    log = tmp_path / "log"
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LD_LIBRARY_PATH": str(fakes.libs["ok"]),
        "CUDA_VERSION": "13.0.1",
        "GPU_PARITY_TERMINATION_LOG": str(log),
        **env,
    }
    with open("/dev/full", "w") as dev_full, open(tmp_path / "stderr", "w+") as stderr:
        done = subprocess.run(
            [sys.executable, "-I", str(PROBE)],
            env=environ,
            stdout=dev_full,
            stderr=dev_full if full == "stdout-and-stderr" else stderr,
            timeout=60,
            check=False,
        )
        stderr.seek(0)
        errors = stderr.read()
    assert done.returncode == code, errors
    assert "Traceback" not in errors
    assert "Exception ignored" not in errors
    assert log.read_text().startswith(("GPU ok", "Expected", "gpu-parity-check could not run"))
