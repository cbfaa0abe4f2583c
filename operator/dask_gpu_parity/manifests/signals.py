"""Termination signals as an exception, so that a write in place can clean up after them.

Apart from :mod:`.inplace` (which needs ``tempfile``): the CLI's one exit path catches
:class:`Signalled` for every command, and ``check`` never writes a file.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Signalled", "caught_signals", "signals_raise"]


class Signalled(BaseException):  # a signal, like KeyboardInterrupt
    """A catchable termination signal (SIGTERM, SIGHUP) raised where the program was."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def caught_signals() -> list[int]:
    """The termination signals this platform has and :func:`signals_raise` turns into raises."""
    return [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`Signalled` while the block runs (main thread only).

    A signal already ignored (as ``nohup`` ignores SIGHUP) is left ignored.

    So the ``except BaseException`` of :func:`.inplace.write_in_place` removes its temporary
    file on them as on Ctrl-C. SIGKILL cannot be caught: the temporary file's name starts with
    the target's and ends in ``.dgp-tmp`` so that it can be found.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise Signalled(signum)

    # A signal ignored by whoever started us (``nohup`` ignores SIGHUP) stays ignored.
    wanted = [sig for sig in caught_signals() if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, handler) for sig in wanted}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
