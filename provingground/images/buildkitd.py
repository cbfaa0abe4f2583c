"""Run buildkitd for one ``make images``: root, its own state and socket, stopped afterwards.

The OCI worker runs RUN steps with the given runc in the host's network namespace (the build
machine reaches the package indexes only through its own network); the containerd worker is off.
BuildKit's state, and so its build cache, stays in ``root`` between runs: a warm rebuild with
nothing changed reuses every step.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["BuildkitdError", "buildkitd"]

_READY_S = 60.0
_STOP_S = 20.0


class BuildkitdError(RuntimeError):
    """buildkitd could not start, or did not answer in time."""


@contextmanager
def buildkitd(bin_dir: Path, runc: Path, root: Path, *, log: Path) -> Iterator[str]:
    """Start buildkitd, wait until ``buildctl debug workers`` answers, and stop it on exit.

    Args:
        bin_dir: The folder holding ``buildkitd`` and ``buildctl``.
        runc: The runc binary the OCI worker runs steps with.
        root: buildkitd's state folder (its cache); created if missing.
        log: buildkitd's log file (overwritten).

    Yields:
        The address to pass to ``buildctl --addr``.

    Raises:
        BuildkitdError: buildkitd exited, or did not answer within a minute (its log says why).
    """
    root.mkdir(parents=True, exist_ok=True)
    # A unix socket path must stay under 108 bytes, so it goes to a short temporary folder.
    run_dir = Path(tempfile.mkdtemp(prefix="dgp-buildkitd-"))
    addr = f"unix://{run_dir / 'buildkitd.sock'}"
    config = run_dir / "buildkitd.toml"
    config.write_text("# make images: every setting is a flag on the command line\n")
    cmd = [
        str(bin_dir / "buildkitd"),
        f"--config={config}",
        f"--root={root}",
        f"--addr={addr}",
        f"--otel-socket-path={run_dir / 'otel.sock'}",
        "--containerd-worker=false",
        "--oci-worker=true",
        f"--oci-worker-binary={runc}",
        "--oci-worker-net=host",
        "--oci-worker-gc=true",
        "--oci-worker-gc-keepstorage=20000",
    ]
    env = {**os.environ, "PATH": f"{runc.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        _wait_ready(bin_dir / "buildctl", addr, proc, log)
        yield addr
    finally:
        _stop(proc)
        shutil.rmtree(run_dir, ignore_errors=True)


def _wait_ready(buildctl: Path, addr: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _READY_S
    probe = [str(buildctl), f"--addr={addr}", "debug", "workers"]
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BuildkitdError(f"buildkitd exited with {proc.returncode}; see {log}")
        if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise BuildkitdError(f"buildkitd did not answer within {_READY_S:.0f}s; see {log}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=_STOP_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
