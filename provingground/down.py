"""``make demo-down``: stop proving-ground processes a killed run left behind.

Reads ``<run dir>/pids`` (the owning Python process, then each component as it starts) and
stops the owner, then any component still running, but only where ``/proc/<pid>/exe`` still
is the recorded binary (pids get reused).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["down", "main"]


def _is_ours(pid: int, binary: str) -> bool:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return Path(exe).name == Path(binary).name or exe == binary


def _stop(pid: int, name: str, binary: str, group: bool) -> None:
    print(f"stopping {name} (pid {pid})")
    kill = os.killpg if group else os.kill
    with contextlib.suppress(ProcessLookupError):
        kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not _is_ours(pid, binary):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        kill(pid, signal.SIGKILL)


def down(run_dir: Path) -> int:
    """Stop the owner, then any component left, from ``run_dir/pids``; return how many ran."""
    pidfile = run_dir / "pids"
    if not pidfile.exists():
        return 0
    entries = [line.split(maxsplit=2) for line in pidfile.read_text().splitlines() if line]
    stopped = 0
    # The owner first: its own teardown stops the components in order.
    for pid_s, name, binary in sorted(entries, key=lambda e: e[1] != "owner"):
        pid = int(pid_s)
        if pid == os.getpid() or not _is_ours(pid, binary):
            continue
        _stop(pid, name, binary, group=name != "owner")
        stopped += 1
    pidfile.unlink(missing_ok=True)
    return stopped


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``make demo-down``."""
    parser = argparse.ArgumentParser(prog="make demo-down")
    parser.add_argument("run_dirs", type=Path, nargs="*", default=[Path(".run/demo")])
    args = parser.parse_args(argv)
    count = sum(down(d) for d in args.run_dirs)
    print(f"demo-down: stopped {count} process(es)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
