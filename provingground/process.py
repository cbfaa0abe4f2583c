"""One control-plane component as an OS process: its own session, its own log file.

Every process is started in a new session (process group) with ``PR_SET_PDEATHSIG`` so it
dies with the Python process that started it, even on SIGKILL; it is stopped by its process
group id, never by name.

The proving ground's command-line tools (helm, kubectl) run to completion through one runner,
:class:`Tool`: output captured, a time limit, and a failure raised with the tool's stderr.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["ComponentError", "Process", "Tool", "ToolError", "helm_env", "log_tail", "stop_all"]

_PR_SET_PDEATHSIG = 1
_LIVE: dict[int, Process] = {}  # insertion order = start order


class ComponentError(RuntimeError):
    """A component failed to start or became unhealthy; the message carries its log tail."""


class ToolError(RuntimeError):
    """A tool exited non-zero; the message names the call and carries its stderr."""


class Tool:
    """A command-line tool run to completion: output captured as text, failures raised.

    Args:
        argv: The binary and the arguments every call starts with (e.g. ``--kubeconfig``).
        env: The tool's environment (default: this process's).
        error: What a failed call raises, given the message (a caller's own error type).
        shown: How many of a call's arguments the failure names (default: all).
        timeout: The default time limit of a call, in seconds.
    """

    def __init__(
        self,
        argv: Sequence[str | os.PathLike[str]],
        env: Mapping[str, str] | None = None,
        *,
        error: Callable[[str], Exception] = ToolError,
        shown: int | None = None,
        timeout: float = 600,
    ) -> None:
        self.argv = [str(a) for a in argv]
        self.env = dict(env) if env is not None else None
        self.error = error
        self.shown = shown
        self.timeout = timeout

    def run(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the tool with ``args``; with ``check``, a failure raises ``error`` (its stderr)."""
        proc = subprocess.run(
            [*self.argv, *args],
            input=input,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=self.timeout if timeout is None else timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            call = " ".join([Path(self.argv[0]).name, *args[: self.shown]])
            raise self.error(f"{call} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc


def helm_env(home: Path, kubeconfig: Path | None = None) -> dict[str, str]:
    """Environment for helm with its config, cache and data under ``home`` (hermetic)."""
    env = {
        **os.environ,
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return env


def log_tail(path: Path, lines: int = 30, width: int = 400) -> str:
    """The last ``lines`` lines of a log file (each cut at ``width``), or why there are none."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log file {path})"
    tail = [line if len(line) <= width else line[:width] + " ..." for line in text.splitlines()]
    tail = tail[-lines:]
    return "\n".join(tail) if tail else f"(log {path} is empty)"


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Process:
    """A started component. ``stop()`` terminates its whole process group."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str | os.PathLike[str]],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only calls prctl, async-signal-safe
            )
        _LIVE[id(self)] = self

    @property
    def pid(self) -> int:
        """Process id (also the process group id)."""
        return self._popen.pid

    def poll(self) -> int | None:
        """Exit code, or None while running."""
        return self._popen.poll()

    def tail(self, lines: int = 30) -> str:
        """Last lines of this component's log."""
        return log_tail(self.log_path, lines)

    def error(self, what: str) -> ComponentError:
        """A ComponentError for this component with its log tail."""
        return ComponentError(f"{self.name} {what}; last lines of {self.log_path}:\n{self.tail()}")

    def check_alive(self) -> None:
        """Raise ComponentError with the log tail if the process has exited."""
        code = self.poll()
        if code is not None:
            raise self.error(f"exited with code {code}")

    def wait_until(
        self, probe: Callable[[], bool], timeout: float, what: str, interval: float = 0.1
    ) -> None:
        """Poll ``probe`` until it is true; fail early if the process dies, or on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            with contextlib.suppress(OSError):
                if probe():
                    return
            if time.monotonic() > deadline:
                raise self.error(f"did not become {what} within {timeout:.0f}s")
            time.sleep(interval)

    def _exited(self, timeout: float) -> bool:
        # Wait for the exit without reaping: while the leader is a zombie its pid (and so its
        # process group id) cannot be reused, so killpg() cannot hit an unrelated process.
        deadline = time.monotonic() + timeout
        while True:
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            except ChildProcessError:
                return True  # already reaped
            if info is not None:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``timeout``; reap the process."""
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            if not self._exited(timeout):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self._exited(timeout)
            # Stragglers in the group (none expected) go too, before the pid is released.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            self._popen.wait()
        _LIVE.pop(id(self), None)

    def kill(self) -> None:
        """SIGKILL the process group at once, as a crash or an OOM kill would; reap the process.

        Nothing gets to clean up: open connections are reset by the kernel, not closed.
        """
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self._popen.wait()
        _LIVE.pop(id(self), None)

    def __repr__(self) -> str:
        return f"Process({self.name!r}, pid={self.pid}, rc={self._popen.returncode})"


def stop_all() -> None:
    """Stop every process this module started and that still runs, newest first."""
    for proc in reversed(list(_LIVE.values())):
        proc.stop(timeout=5)


atexit.register(stop_all)
