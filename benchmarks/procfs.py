"""What /proc says about a process: its resident memory (stdlib only, so that a benchmark's
child process can read its own without importing the proving ground)."""

from __future__ import annotations

import contextlib
from pathlib import Path

__all__ = ["proc_status"]


def proc_status(pid: int | str) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid`` (or ``"self"``) in bytes; empty when the process is gone."""
    out = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out
