"""gpu-parity-check: prove that this container can use its GPU before the Dask scheduler starts.

Standard library only (ctypes to ``libcuda.so.1`` and ``libnvidia-ml.so.1``), so it runs in any
Dask/RAPIDS image as ``python -I probe.py`` or ``python -I -c "<this source>"``. NVML ignores
``CUDA_VISIBLE_DEVICES``, so the decisive checks use the CUDA driver API (docs/probe.md). Checks
run in order and stop at the first failure, which is one line: what was expected, what was found,
what to do. One JSON summary goes to stdout and one line to the termination log. Exit 0: the GPU
is usable; 1: a check failed; 2: the probe itself could not run. The exit code says the verdict
even where stdout, stderr or the termination log cannot be written (a full disk, a FIFO nobody
reads), and a blank setting counts as unset.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import importlib
import importlib.util
import json
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["CHECKS", "ENV_VARS", "CheckFailedError", "main"]  # and the ENV_* names

# Settings (the injector sets them; docs/probe.md describes them). Flags of main() override them.
ENV_EXPECT_DRIVER = "GPU_PARITY_EXPECT_DRIVER"  # the workers' exact driver, e.g. 580.159.04
ENV_EXPECT_CUDA = "GPU_PARITY_EXPECT_CUDA"  # CUDA the image needs; default: $CUDA_VERSION
ENV_MIN_COMPUTE_CAPABILITY = "GPU_PARITY_MIN_COMPUTE_CAPABILITY"  # default: RAPIDS' minimum
ENV_MIN_FREE_MEMORY_MIB = "GPU_PARITY_MIN_FREE_MEMORY_MIB"  # default: not checked
ENV_TIMEOUT_S = "GPU_PARITY_TIMEOUT_S"  # give up on a hung driver; default 60
ENV_TERMINATION_LOG = "GPU_PARITY_TERMINATION_LOG"  # default /dev/termination-log
ENV_VARS = (
    ENV_EXPECT_DRIVER,
    ENV_EXPECT_CUDA,
    ENV_MIN_COMPUTE_CAPABILITY,
    ENV_MIN_FREE_MEMORY_MIB,
    ENV_TIMEOUT_S,
    ENV_TERMINATION_LOG,
)
# The checks in the order they run; each is the _Probe method of the same name (dashes as _).
CHECKS = (
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
)
_DEFAULTS = {ENV_TIMEOUT_S: "60", ENV_TERMINATION_LOG: "/dev/termination-log"}
_RAPIDS_MIN_CC = {12: (7, 0), 13: (7, 5)}  # RAPIDS platform support by CUDA major
_HIDDEN = ("", "-1", "NoDevFiles")  # CUDA_VISIBLE_DEVICES values that hide every GPU
_CU_ADVICE = {
    2: "GPU memory is full: find the process holding it (nvidia-smi on the node)",
    46: "the GPU is in an exclusive compute mode and busy: free it or set compute mode DEFAULT",
    216: "the GPU is in an exclusive compute mode and busy: free it or set compute mode DEFAULT",
    802: "the system is not ready: on NVSwitch nodes check that nvidia-fabricmanager runs",
    803: "the driver's libraries do not match its kernel module: reboot or repair the node",
    804: "the image's CUDA forward-compatibility libraries do not support this GPU: use a driver "
    "that supports the image's CUDA",
}
_NVML_ADVICE = {
    9: "the NVIDIA kernel driver is not loaded on this node: check the node's driver install",
    18: "the driver was upgraded without a reboot: drain and reboot the node",
}


class CheckFailedError(Exception):
    """A check found the GPU unusable; the message is the one line users read."""


class _ProbeSettingError(Exception):
    """The probe was given a setting it cannot use (exit 2)."""


def _version(text: str, name: str) -> tuple[int, int]:
    """Parse MAJOR.MINOR[.PATCH] into (major, minor)."""
    parts = text.strip().split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise _ProbeSettingError(f'{name}="{text}" is not a MAJOR.MINOR version, e.g. 7.5')
    return int(parts[0]), int(parts[1])


_TIMEOUT_RANGE = (1.0, 3600.0)  # seconds: a hung driver is reported within the hour
_DRIVER = re.compile(r"^\d+\.\d+(?:\.\d+)?$")


def _timeout_s(text: str) -> float:
    low, high = _TIMEOUT_RANGE
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not low <= seconds <= high:  # also refuses NaN and infinities
        raise _ProbeSettingError(
            f'{ENV_TIMEOUT_S}="{text}" is not a number of seconds from {low:g} to {high:g}'
        )
    return seconds


def _validate(settings: dict[str, str]) -> float:
    """Check every setting before any GPU call; return the timeout in seconds.

    Raises:
        _ProbeSettingError: naming the setting and what it accepts.
    """
    for name in (ENV_EXPECT_CUDA, ENV_MIN_COMPUTE_CAPABILITY):
        if settings[name].strip():
            _version(settings[name], name)
    driver = settings[ENV_EXPECT_DRIVER].strip()
    if driver and not _DRIVER.match(driver):
        raise _ProbeSettingError(
            f'{ENV_EXPECT_DRIVER}="{driver}" is not a driver version, e.g. 580.95.05'
        )
    memory = settings[ENV_MIN_FREE_MEMORY_MIB].strip()
    if memory and not (memory.isascii() and memory.isdigit()):
        raise _ProbeSettingError(f'{ENV_MIN_FREE_MEMORY_MIB}="{memory}" is not a whole number')
    return _timeout_s(settings[ENV_TIMEOUT_S])


def _fmt(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


# The imports: what, from which check on, the switch interval meanwhile, the wait after a verdict
_FRAMEWORKS, _IMPORTS_FROM, _SWITCH_S, _JOIN_S = ("rmm", "cupy"), "libraries", 0.0005, 10.0


class _Imports(threading.Thread):
    """Imports rmm and CuPy while the driver initialises: what each check would have imported."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        super().__init__(name="gpu-parity-imports", daemon=True)
        self.outcomes: dict[str, tuple[bool, Any, float]] = {}  # (find_spec answered, value, ms)
        self.ready = {module: threading.Event() for module in modules}

    def run(self) -> None:
        for module, ready in self.ready.items():
            t0, answered, value = time.perf_counter(), False, None  # answered: by find_spec
            try:
                spec = importlib.util.find_spec(module)
                answered = True
                value = spec and importlib.import_module(module)
            except BaseException as exc:  # raised again in its check, or by outcome (exit 2)
                value = exc  # type: ignore[assignment]  # a module, None, or an exception
            self.outcomes[module] = (answered, value, round((time.perf_counter() - t0) * 1000, 1))
            ready.set()

    def outcome(self, name: str) -> Any:
        """The module, ``None`` or what importing it raised; raises what ``find_spec`` raised."""
        if self.ident is None:  # never started (a _Probe used on its own): import here and now
            self.run()
        self.ready[name].wait()
        if not (outcome := self.outcomes[name])[0]:
            raise outcome[1]
        return outcome[1]


class _Probe:
    """The checks, in order, and the facts they gather for the summary."""

    def __init__(self, settings: dict[str, str], imports: _Imports | None = None) -> None:
        self.settings, self.imports = settings, imports or _Imports(_FRAMEWORKS)
        self.cuda: Any = None
        self.nvml: Any = None
        self.nvml_note = ""
        self.nvml_uuids: list[str] = []
        self.nvml_handle: Any = None
        self.mig_on = False
        self.dev = ctypes.c_int(0)
        self.name = "the GPU"
        self.image_cuda: tuple[int, int] | None = None
        self.facts: dict[str, Any] = {}

    def _cu(self, func: str, *args: Any) -> None:
        code = int(getattr(self.cuda, func)(*args))
        if code:
            name, text = ctypes.c_char_p(), ctypes.c_char_p()
            self.cuda.cuGetErrorName(code, ctypes.byref(name))
            self.cuda.cuGetErrorString(code, ctypes.byref(text))
            found = f"{func} returned {code} {_s(name.value)}: {_s(text.value)}"
            if code == 100:
                raise CheckFailedError(self._no_device(found))
            advice = _CU_ADVICE.get(code, "check the node with nvidia-smi and its kernel log (Xid)")
            raise CheckFailedError(f"Expected {func} to succeed on {self.name}, {found}: {advice}")

    def _nv(self, func: str, *args: Any) -> int:
        return int(getattr(self.nvml, func)(*args))

    def _no_device(self, found: str) -> str:
        causes = [found]
        if "CUDA_VISIBLE_DEVICES" in os.environ:
            causes.append(f'CUDA_VISIBLE_DEVICES="{os.environ["CUDA_VISIBLE_DEVICES"]}"')
        if os.environ.get("NVIDIA_VISIBLE_DEVICES", "all") in ("", "void", "none"):
            causes.append(f'NVIDIA_VISIBLE_DEVICES="{os.environ["NVIDIA_VISIBLE_DEVICES"]}"')
        if self.nvml_uuids:
            causes.append(f"NVML still sees {len(self.nvml_uuids)} GPU(s)")
        if self.mig_on:
            causes.append("MIG mode is on, so only MIG devices can run CUDA")
        return (
            f"Expected at least one CUDA device, found none ({'; '.join(causes)}): give the "
            "scheduler container the workers' GPU resource and do not hide it with "
            "CUDA_VISIBLE_DEVICES"
        )

    def visible_devices(self) -> str:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        if cvd is not None and cvd.strip() in _HIDDEN:
            raise CheckFailedError(
                f'Expected CUDA_VISIBLE_DEVICES unset or naming a GPU, found "{cvd}", which hides '
                "every GPU from CUDA while NVML and nvidia-smi still show them: remove it from the "
                "scheduler container's env"
            )
        for entry in cvd.split(",") if cvd is not None else []:
            if not (entry.strip().isdigit() or entry.strip().startswith(("GPU-", "MIG-"))):
                raise CheckFailedError(
                    f"Expected CUDA_VISIBLE_DEVICES to list device indices or GPU-/MIG- UUIDs, "
                    f'found "{cvd}" with entry "{entry}", which hides that GPU and all after it: '
                    "fix or remove CUDA_VISIBLE_DEVICES"
                )
        if os.environ.get("NVIDIA_VISIBLE_DEVICES", "").strip() == "none":
            raise CheckFailedError(
                'Expected NVIDIA_VISIBLE_DEVICES to name the allocated GPU, found "none", so the '
                "container runtime mounts no GPU: remove it and request the workers' GPU resource"
            )
        return "pass"

    def libraries(self) -> str:
        try:
            self.cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise CheckFailedError(
                f"Expected the NVIDIA driver's libcuda.so.1 in the container, found none ({exc}): "
                "request the workers' GPU resource (nvidia.com/gpu or a MIG resource), set the "
                "workers' runtimeClassName, and keep compute in NVIDIA_DRIVER_CAPABILITIES"
            ) from exc
        try:
            self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:  # CUDA works without NVML; only the driver check needs it
            self.nvml_note = self.facts["nvml"] = f"libnvidia-ml.so.1 not loadable ({exc})"
            return "pass"
        code = self._nv("nvmlInit_v2")
        if code:
            self.nvml.nvmlErrorString.restype = ctypes.c_char_p
            advice = _NVML_ADVICE.get(code, "check the node's driver with nvidia-smi")
            raise CheckFailedError(
                f"Expected nvmlInit to succeed, it returned {code} "
                f"{_s(self.nvml.nvmlErrorString(code))}: {advice}"
            )
        buf, count, handle, mig, pending = (
            ctypes.create_string_buffer(96),
            ctypes.c_uint(),
            ctypes.c_void_p(),
            ctypes.c_uint(),
            ctypes.c_uint(),
        )
        self._nv("nvmlSystemGetDriverVersion", buf, 96)
        self.facts["driver_version"] = _s(buf.value)
        self._nv("nvmlDeviceGetCount_v2", ctypes.byref(count))
        for index in range(count.value):
            if self._nv("nvmlDeviceGetHandleByIndex_v2", index, ctypes.byref(handle)) == 0:
                self._nv("nvmlDeviceGetUUID", handle, buf, 96)
                self.nvml_uuids.append(_s(buf.value))
                if self._nv("nvmlDeviceGetMigMode", handle, *map(ctypes.byref, (mig, pending))):
                    mig.value = 0  # NOT_SUPPORTED: no MIG on this GPU
                self.mig_on = self.mig_on or mig.value == 1
        self.facts["nvml_gpu_count"] = count.value
        return "pass"

    def device_uuids(self) -> str:
        entries = [e.strip() for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
        wanted = [e for e in entries if e.startswith("GPU-")]
        if self.nvml is None or not wanted:
            return "skip"
        for entry in wanted:
            if not any(uuid.startswith(entry) for uuid in self.nvml_uuids):
                raise CheckFailedError(
                    f"Expected CUDA_VISIBLE_DEVICES to name a GPU of this container, found "
                    f"{entry}, not among {', '.join(self.nvml_uuids) or 'no GPUs'}: remove "
                    "CUDA_VISIBLE_DEVICES (the device plugin already picks the GPU)"
                )
        return "pass"

    def cuda_init(self) -> str:
        self._cu("cuInit", 0)
        version = ctypes.c_int()
        self._cu("cuDriverGetVersion", ctypes.byref(version))
        self.facts["cuda_driver_version"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
        return "pass"

    def cuda_devices(self) -> str:
        count, total, uuid = ctypes.c_int(), ctypes.c_size_t(), (ctypes.c_ubyte * 16)()
        name = ctypes.create_string_buffer(256)
        self._cu("cuDeviceGetCount", ctypes.byref(count))
        if count.value < 1:
            raise CheckFailedError(self._no_device("cuDeviceGetCount returned 0"))
        self._cu("cuDeviceGet", ctypes.byref(self.dev), 0)
        self._cu("cuDeviceGetName", name, 256, self.dev)
        self._cu("cuDeviceGetUuid", uuid, self.dev)
        self._cu("cuDeviceTotalMem_v2", ctypes.byref(total), self.dev)
        h = bytes(uuid).hex()
        self.name = _s(name.value)
        uuid_text = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        self.facts.update(cuda_device_count=count.value, device=self.name, uuid=uuid_text)
        self.facts["memory_total_mib"] = total.value >> 20
        if self.nvml is not None:
            handle = ctypes.c_void_p()
            if self._nv("nvmlDeviceGetHandleByUUID", uuid_text.encode(), ctypes.byref(handle)) == 0:
                self.nvml_handle = handle
        return "pass"

    def driver_version(self) -> str:
        expected = self.settings.get(ENV_EXPECT_DRIVER, "").strip()
        if not expected:
            return "skip"
        if self.nvml is None:
            raise CheckFailedError(
                f"Expected NVIDIA driver {expected}, could not read the driver version: "
                f"{self.nvml_note}: add utility to NVIDIA_DRIVER_CAPABILITIES"
            )
        found = self.facts["driver_version"]
        if re.sub(r"\.0+(?=\d)", ".", found) != re.sub(r"\.0+(?=\d)", ".", expected):
            raise CheckFailedError(
                f"Expected NVIDIA driver {expected} (the workers'), found {found}: run the "
                f"scheduler on nodes labelled nvidia.com/cuda.driver-version.full={expected}"
            )
        return "pass"

    def cuda_version(self) -> str:
        expected = _given(self.settings.get(ENV_EXPECT_CUDA))  # blank: the image's, as unset
        name = ENV_EXPECT_CUDA if expected else "CUDA_VERSION"
        text = expected or _given(os.environ.get("CUDA_VERSION"))
        if not text:
            return "skip"
        self.image_cuda = _version(text, name)
        self.facts["image_cuda_version"] = text.strip()
        found = _version(self.facts["cuda_driver_version"], "cuDriverGetVersion")
        if found < self.image_cuda:
            raise CheckFailedError(
                f"Expected a driver that supports CUDA {_fmt(self.image_cuda)} ({name}={text}), "
                f"found one that supports CUDA {_fmt(found)}: run the scheduler on nodes with the "
                "workers' driver, or use an image built for this driver's CUDA"
            )
        return "pass"

    def compute_capability(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._cu("cuDeviceGetAttribute", ctypes.byref(major), 75, self.dev)
        self._cu("cuDeviceGetAttribute", ctypes.byref(minor), 76, self.dev)
        found = (major.value, minor.value)
        self.facts["compute_capability"] = _fmt(found)
        given = self.settings.get(ENV_MIN_COMPUTE_CAPABILITY, "").strip()
        if given:
            source = ENV_MIN_COMPUTE_CAPABILITY
            minimum = _version(given, source)
        elif self.image_cuda and self.image_cuda[0] in _RAPIDS_MIN_CC:
            minimum = _RAPIDS_MIN_CC[self.image_cuda[0]]
            source = f"RAPIDS' minimum for CUDA {self.image_cuda[0]}"
        else:
            return "skip"
        if found < minimum:
            raise CheckFailedError(
                f"Expected compute capability {_fmt(minimum)} or newer ({source}), found "
                f"{_fmt(found)} on {self.name}: give the scheduler a GPU of the workers' family "
                "(node label nvidia.com/gpu.compute.major)"
            )
        return "pass"

    def context(self) -> str:
        ctx = ctypes.c_void_p()
        self._cu("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), self.dev)
        self._cu("cuCtxSetCurrent", ctx)
        return "pass"

    def allocation(self) -> str:
        ptr, free, total = ctypes.c_uint64(), ctypes.c_size_t(), ctypes.c_size_t()
        self._cu("cuMemAlloc_v2", ctypes.byref(ptr), 1 << 20)
        self._cu("cuMemFree_v2", ptr)
        self._cu("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        self.facts["memory_free_mib"] = free.value >> 20
        return "pass"

    def free_memory(self) -> str:
        given = self.settings.get(ENV_MIN_FREE_MEMORY_MIB, "").strip()
        if not given:
            return "skip"
        if self.facts["memory_free_mib"] < int(given):
            raise CheckFailedError(
                f"Expected at least {given} MiB free on {self.name}, found "
                f"{self.facts['memory_free_mib']} MiB: another process holds the GPU's memory; "
                "give the scheduler its own GPU"
            )
        return "pass"

    def gpu_health(self) -> str:
        if self.nvml_handle is None:
            return "skip"
        ecc, corr, unc, pend, fail = (ctypes.c_ulonglong(), *(ctypes.c_uint() for _ in range(4)))
        uuid = self.facts["uuid"]
        if self._nv("nvmlDeviceGetTotalEccErrors", self.nvml_handle, 1, 0, ctypes.byref(ecc)) == 0:
            self.facts["ecc_uncorrected_volatile"] = ecc.value
            if ecc.value:
                raise CheckFailedError(
                    f"Expected no uncorrected ECC errors, found {ecc.value} on {uuid} since the "
                    "driver loaded: drain the node and have the GPU checked (nvidia-smi -q -d ECC)"
                )
        args = (self.nvml_handle, *(ctypes.byref(v) for v in (corr, unc, pend, fail)))
        if self._nv("nvmlDeviceGetRemappedRows", *args) == 0 and (pend.value or fail.value):
            raise CheckFailedError(
                f"Expected no pending or failed row remapping, found pending={pend.value} "
                f"failed={fail.value} on {uuid}: reset the GPU or drain the node for service"
            )
        return "pass"

    def rmm(self) -> str:
        return self._framework("rmm", "rmm.DeviceBuffer(size=1)")

    def cupy(self) -> str:
        return self._framework("cupy", "cupy.zeros(1).get()")

    def _framework(self, module: str, call: str) -> str:
        mod = self.imports.outcome(module)
        if mod is None:
            return "skip"
        self.facts.setdefault("import_ms", {})[module] = self.imports.outcomes[module][2]
        try:
            if isinstance(mod, BaseException):
                raise mod  # importing it failed: the finding, as if imported here
            if module == "rmm":
                mod.DeviceBuffer(size=1)
            else:
                mod.zeros(1).get()
        except Exception as exc:  # any failure of the image's own stack is the finding
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise CheckFailedError(
                f"Expected {call} to work on {self.name}, it raised {type(exc).__name__}: "
                f"{first}: check the image's {module} build against the driver's CUDA"
            ) from exc
        return "pass"


def _s(raw: bytes | None) -> str:
    return (raw or b"").decode(errors="replace")


def _given(value: str | None) -> str:
    """A setting as given; a blank one (empty or whitespace, as ``value: " "``) counts as unset."""
    return value if value and value.strip() else ""


def _say(line: str, stream: TextIO | None) -> None:
    """Print one line; a full or closed stream loses it, never the verdict (the exit code)."""
    if stream is None:  # started with the descriptor closed
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        # The interpreter's last flush would fail again and exit 120: let it reach nothing.
        with contextlib.suppress(OSError, ValueError):
            fileno = stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fileno)
            os.close(null)


def _write_termination_log(path: str, message: str) -> None:
    """Write the line where kubelet reads it: never blocking, never creating a blank name.

    Opened non-blocking, a FIFO without a reader fails at once (ENXIO) instead of waiting for
    one forever; it is skipped with a note on stderr.
    """
    if not path.strip():
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            _say(
                f"Note: the termination log {path} is a FIFO without a reader: skipped it; "
                "the line above is the result",
                sys.stderr,
            )
        return  # not in a pod, or read-only: the logs still hold the line
    try:
        data = (message + "\n").encode("utf-8", "backslashreplace")
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # a full disk, a full pipe: the logs still hold the line
    finally:
        os.close(fd)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as a setting error, so the JSON line is still printed."""

    def error(self, message: str) -> Any:
        raise _ProbeSettingError(f"{message} (see --help)")


def _settings(argv: list[str] | None) -> dict[str, str]:
    parser = _Parser(prog="gpu-parity-check", description="Prove this container can use its GPU.")
    for env in ENV_VARS:
        flag = "--" + env[len("GPU_PARITY_") :].lower().replace("_", "-")
        parser.add_argument(flag, dest=env, metavar="VALUE", help=f"overrides ${env}")
    args = vars(parser.parse_args(argv))
    return {
        env: _given(args[env]) or _given(os.environ.get(env)) or _DEFAULTS.get(env, "")
        for env in ENV_VARS
    }


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915  # one linear run, one summary
    """Run the checks; print one JSON line; return 0 ok, 1 a check failed, 2 probe error."""
    start = time.perf_counter()
    log_path = _given(os.environ.get(ENV_TERMINATION_LOG)) or _DEFAULTS[ENV_TERMINATION_LOG]
    probe, checks, code = _Probe({}), [], 0
    summary: dict[str, Any] = {"ok": False, "failed_check": None, "reason": None}
    current = ["settings"]
    watchdog, imports, switch = None, None, sys.getswitchinterval()

    def _timeout() -> None:
        reason = (
            f"Expected the probe to finish in {timeout} s, {current[0]} was still running: the "
            "driver or GPU is not answering; check the node with nvidia-smi and its kernel log"
        )
        _say(reason, sys.stderr)
        _write_termination_log(log_path, reason)
        os._exit(1)

    try:
        settings = _settings(argv)
        log_path = settings[ENV_TERMINATION_LOG] or log_path
        timeout = _validate(settings)
        probe = _Probe(settings, imports := _Imports(_FRAMEWORKS))
        watchdog = threading.Timer(timeout, _timeout)
        watchdog.daemon = True
        watchdog.start()
        for name in CHECKS:
            if name == _IMPORTS_FROM:  # each driver call hands the interpreter over: at once
                sys.setswitchinterval(min(switch, _SWITCH_S))
                imports.start()
            step: Callable[[], str] = getattr(probe, name.replace("-", "_"))
            current[0], t0 = name, time.perf_counter()
            entry = {"name": name, "result": "fail", "duration_ms": 0.0}
            checks.append(entry)
            try:
                entry["result"] = step()
            finally:
                entry["duration_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        summary["ok"] = True
        f = probe.facts
        message = (
            f"GPU ok: {f['device']} {f['uuid']}, driver {f.get('driver_version', '?')}, CUDA "
            f"{f['cuda_driver_version']}, compute capability {f['compute_capability']}"
        )
    except CheckFailedError as exc:
        code, message = 1, str(exc)
        summary.update(failed_check=current[0], reason=message)
    except _ProbeSettingError as exc:
        code, message = 2, f"gpu-parity-check could not run: {exc}"
        summary.update(failed_check=current[0], reason=message)
    except Exception as exc:  # the one place that turns the unexpected into exit 2
        code = 2
        message = f"gpu-parity-check could not run ({current[0]}): {type(exc).__name__}: {exc}"
        summary.update(failed_check=current[0], reason=message)
    finally:
        if watchdog is not None:  # never outlive main(): verify-gpu runs it in process
            watchdog.cancel()
        sys.setswitchinterval(switch)
    summary.update(probe.facts, checks=checks)
    summary["wall_ms"] = round((time.perf_counter() - start) * 1000, 1)
    _say(json.dumps(summary), sys.stdout)
    if code:
        _say(message, sys.stderr)
    _write_termination_log(log_path, message)
    if imports is not None and imports.ident is not None:  # let an import under way finish
        imports.join(_JOIN_S)
    return code


if __name__ == "__main__":
    sys.exit(main())
