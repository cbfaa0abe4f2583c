"""Writing a fixed file in place, as careful formatters do, and never half of it.

The README's "fix --in-place" section compares this with ruff format and prettier: writes go
through symlinks (not those a folder walk finds leading out of the folder), keep mode, owner,
hard links, extended attributes and ACLs, replace the file atomically where that changes
nothing else, and leave no temporary file behind on an error or a signal that can be caught.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from .signals import Signalled, caught_signals, signals_raise

__all__ = ["Signalled", "escaping_link", "signals_raise", "write_in_place"]

BOM = b"\xef\xbb\xbf"


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP back while the block runs; they arrive after it.

    Deferred at Python's level, not by the thread's signal mask: the kernel hands a signal
    sent to the process to any thread that does not block it, and Python then runs its handler
    in the main thread whatever that thread's mask says (a library's worker thread is enough).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def defer(signum: int, _frame: Any) -> None:
        pending.append(signum)

    previous = {}
    for sig in (signal.SIGINT, *caught_signals()):
        handler = signal.getsignal(sig)
        if handler is not signal.SIG_IGN and handler is not None:
            previous[sig] = signal.signal(sig, defer)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def escaping_link(path: str, folders: Sequence[str]) -> tuple[str, str] | None:
    """(target, folder) when ``path``, found in a walk of ``folders``, resolves outside them.

    A file named on the command line is written through whatever it links to (as ruff format
    does); a link met in a folder walk is written only while its target stays in that folder.
    """
    absolute, real = os.path.abspath(path), os.path.realpath(path)
    walked = [f for f in folders if _within(absolute, os.path.abspath(f))]
    if not walked or any(_within(real, os.path.realpath(f)) for f in walked):
        return None
    return real, walked[0]


def _within(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def write_in_place(path: str, text: str, *, bom: bool = False) -> str:
    """Replace a file's content; return how (``replaced`` or ``overwritten``).

    A symlink is followed: its target changes, the link stays. The new content goes to a
    temporary file beside the target, which gets the target's owner, extended attributes (POSIX
    ACLs among them) and mode and is renamed over it (atomic: a crash leaves the old file or the
    new one). Where that would change the file beyond its content, the file is overwritten in
    place, as ruff format and prettier always do: a file with several hard links (a rename would
    split them), an owner or an attribute that cannot be given to a new file, a folder that
    cannot be written.

    Raises:
        OSError: the file cannot be written; its content is then as it was.
        ValueError: the file is no regular file (a FIFO, a device): it is not touched.
    """
    target = os.path.realpath(path)
    info = os.stat(target)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{_kind(info.st_mode)}, not a regular file: not written")
    data = (BOM if bom else b"") + text.encode("utf-8")
    if info.st_nlink > 1:
        _overwrite(target, data)
        return "overwritten"
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".dgp-tmp", dir=os.path.dirname(target)
        )
    except PermissionError:
        _overwrite(target, data)
        return "overwritten"
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if not _same_metadata(tmp, target, info):
            os.unlink(tmp)
            _overwrite(target, data)
            return "overwritten"
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return "replaced"


def _same_metadata(tmp: str, target: str, info: os.stat_result) -> bool:
    """Give ``tmp`` the owner, extended attributes and mode of ``target``; False if it cannot."""
    if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.chown(tmp, info.st_uid, info.st_gid)
        except PermissionError:
            return False
    try:
        wanted = _xattrs(target)
        for name in set(_xattrs(tmp)) - set(wanted):  # one a folder's default ACL gave it
            os.removexattr(tmp, name)
        for name, value in wanted.items():
            os.setxattr(tmp, name, value)
        os.chmod(tmp, info.st_mode & 0o7777)  # after the ACL, whose mask is the group bits
        return _xattrs(tmp) == wanted and os.stat(tmp).st_mode == info.st_mode
    except OSError:
        return False


def _xattrs(path: str) -> dict[str, bytes]:
    try:
        names = os.listxattr(path)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise
    return {name: os.getxattr(path, name) for name in names}


def _overwrite(target: str, data: bytes) -> None:
    """Write ``data`` over the file, all of it or nothing of it unless the machine stops.

    The room for a longer content is reserved first (a full disk then fails before a byte
    changes), and the signals that end the program are held until the write is done.
    """
    with open(target, "r+b") as handle, _signals_held():
        fd = handle.fileno()
        old = os.fstat(fd).st_size
        if len(data) > old:
            try:
                os.posix_fallocate(fd, old, len(data) - old)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, old)
                if exc.errno not in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS):
                    raise
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(fd)


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
        stat.S_ISDIR: "a folder",
    }
    return next((name for test, name in kinds.items() if test(mode)), "a special file")
