"""The files a kustomization names as patches: fragments, no manifests, so walks leave them out.

Whatever the kustomization holds, what can be read is used and the rest is one notice
(DGP903): a field of the wrong shape, a file that is not YAML. kustomize itself would refuse
such a kustomization; the walk only needs the patch files' names.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from .documents import parse
from .sources import FileError, Source

__all__ = ["KUSTOMIZATIONS", "PARTIAL", "patch_files", "read_regular"]

KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
PARTIAL = "DGP903"  # the kustomization could be read only in part (docs/findings.md)
_LIMIT = 2**20
_SHOWN_PROBLEMS = 3


def read_regular(path: str, limit: int, *, follow: bool = True) -> bytes:
    """At most ``limit`` bytes of a regular file, never blocking on a FIFO or a device.

    Raises:
        OSError: the file cannot be opened, or it is no regular file (``strerror`` says so).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    with open(fd, "rb", closefd=True) as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        return handle.read(limit)


def patch_files(folder: str, shown: str) -> tuple[frozenset[str], FileError | None]:
    """The patch files the kustomization in ``folder`` names, and a notice for the rest.

    ``folder`` is absolute; ``shown`` is how reports name it. The first kustomization file that
    exists decides (kustomize refuses a folder with two).
    """
    for name in KUSTOMIZATIONS:
        path = os.path.join(folder, name)
        if not os.path.lexists(path):
            continue
        display = os.path.join(shown, name) if shown else name
        named, problems = _named(path, display)
        found = frozenset(os.path.normpath(os.path.join(folder, p)) for p in named)
        if not problems:
            return found, None
        more = len(problems) - _SHOWN_PROBLEMS
        text = "; ".join(problems[:_SHOWN_PROBLEMS]) + (f"; and {more} more" if more > 0 else "")
        message = (
            f"kustomization read in part: {text}: files it names as patches there are checked "
            "as manifests; kustomize build would refuse it too: fix the kustomization"
        )
        return found, FileError(display, message, code=PARTIAL)
    return frozenset(), None


def _named(path: str, display: str) -> tuple[list[str], list[str]]:
    """The patch file names a kustomization holds, and what could not be read, one per item."""
    try:
        text = read_regular(path, _LIMIT).decode("utf-8")
    except OSError as exc:
        return [], [f"cannot read it ({exc.strerror or exc})"]
    except UnicodeDecodeError:
        return [], ["it is not UTF-8 text"]
    try:
        documents = [d for d in parse(Source(path, text, label=display)) if not d.prefix]
    except FileError as exc:
        return [], [f"it is not YAML ({exc.detail})"]
    except (ValueError, RecursionError) as exc:  # a date or number PyYAML cannot construct
        return [], [f"it is not YAML ({exc})"]
    if not documents:
        return [], ["it holds no mapping"]
    data = documents[0].data
    named: list[str] = []
    problems: list[str] = []
    merges = data.get("patchesStrategicMerge")
    for index, item in enumerate(_items(merges, "patchesStrategicMerge", problems)):
        if isinstance(item, str):
            named.append(item)
        else:
            problems.append(f"patchesStrategicMerge[{index}] is {_shown(item)}, not a file name")
    for key in ("patches", "patchesJson6902"):
        for index, item in enumerate(_items(data.get(key), key, problems)):
            if not isinstance(item, dict):
                problems.append(f"{key}[{index}] is {_shown(item)}, not a mapping")
            elif isinstance(item.get("path"), str):
                named.append(item["path"])
            elif item.get("path") is not None:
                problems.append(f"{key}[{index}].path is {_shown(item['path'])}, not a file name")
    return named, problems


def _items(value: Any, key: str, problems: list[str]) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    problems.append(f"{key} is {_shown(value)}, not a list")
    return []


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if (isinstance(value, int) and value.bit_length() <= 64) or isinstance(value, float):
        return str(value)
    return "a number" if isinstance(value, int) else f"a {type(value).__name__}"
