"""The pinned inputs of ``make images`` (``versions.env``) and the checks of what was fetched.

``versions.env`` is the one place the versions, URLs and checksums are written; this module reads
it, downloads pinned files into the cache once, and refuses a file whose sha256 differs.
"""

from __future__ import annotations

import hashlib
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PinMismatchError",
    "Pins",
    "fetch_pinned",
    "lock_drift",
    "parse_lock",
    "read_pins",
    "sha256_file",
]

HERE = Path(__file__).resolve().parent
VERSIONS = HERE / "versions.env"
_KEYS = (
    "BUILDKIT_VERSION",
    "DEBIAN_SUITE",
    "DEBIAN_MIRROR",
    "PYTHON_BASE_PACKAGES",
    "PYTHON_BASE_VERSION",
    "BUSYBOX_DEB_URL",
    "BUSYBOX_DEB_SHA256",
    "BUSYBOX_VERSION",
    "DASK_KUBERNETES_VERSION",
    "DASK_KUBERNETES_SDIST_SHA256",
)


class PinMismatchError(ValueError):
    """A downloaded file is not the one ``versions.env`` pins, or the file is malformed."""


@dataclass(frozen=True)
class Pins:
    """The values of ``versions.env``, one attribute per key (lower case)."""

    buildkit_version: str
    debian_suite: str
    debian_mirror: str
    python_base_packages: str
    python_base_version: str
    busybox_deb_url: str
    busybox_deb_sha256: str
    busybox_version: str
    dask_kubernetes_version: str
    dask_kubernetes_sdist_sha256: str

    @property
    def python_base_name(self) -> str:
        """The stand-in base's name, e.g. ``python:3.11-slim-bookworm`` (the Python it holds)."""
        return f"python:{self.python_base_version}-slim-{self.debian_suite}"

    @property
    def busybox_base_name(self) -> str:
        """The stand-in busybox base's name, e.g. ``busybox:1.37.0``."""
        return f"busybox:{self.busybox_version}"


def read_pins(path: Path = VERSIONS) -> Pins:
    """Read ``versions.env`` (``KEY=value`` lines, ``#`` comments).

    Raises:
        PinMismatchError: A key is missing, unknown or repeated, or a checksum is not 64 hex digits.
    """
    values: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or key not in _KEYS or key in values:
            raise PinMismatchError(
                f"{path}:{number}: expected one of {', '.join(_KEYS)} once, as KEY=value"
            )
        values[key] = value
    missing = [k for k in _KEYS if k not in values]
    if missing:
        raise PinMismatchError(f"{path}: missing {', '.join(missing)}")
    for key in ("BUSYBOX_DEB_SHA256", "DASK_KUBERNETES_SDIST_SHA256"):
        if len(values[key]) != 64 or set(values[key]) - set("0123456789abcdef"):
            raise PinMismatchError(
                f"{path}: {key} must be 64 lower-case hex digits, got {values[key]!r}"
            )
    return Pins(**{k.lower(): v for k, v in values.items()})


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file."""
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def fetch_pinned(url: str, sha256: str, cache: Path) -> Path:
    """Download ``url`` into ``cache/<sha256>/`` once, and return it only if its sha256 matches.

    Raises:
        PinMismatchError: The file's sha256 is not ``sha256`` (the partial download is removed).
    """
    dest = cache / sha256 / url.rsplit("/", 1)[-1]
    if dest.is_file() and sha256_file(dest) == sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    with urllib.request.urlopen(url, timeout=120) as response, tmp.open("wb") as out:
        shutil.copyfileobj(response, out)
    check_sha256(tmp, sha256, what=url)
    tmp.rename(dest)
    return dest


def check_sha256(path: Path, sha256: str, *, what: str) -> None:
    """Refuse ``path`` unless its sha256 is ``sha256`` (the file is then removed).

    Raises:
        PinMismatchError: The checksums differ.
    """
    got = sha256_file(path)
    if got != sha256:
        path.unlink()
        raise PinMismatchError(
            f"{what}: sha256 {got} is not the pinned {sha256}; "
            "check the file, then update versions.env"
        )


def parse_lock(text: str) -> dict[str, str]:
    """A lock file's ``name=version`` lines (``#`` comments and blank lines skipped)."""
    pairs = (line.strip().split("=", 1) for line in text.splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2 and not p[0].startswith("#")}


def lock_drift(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    """Packages whose installed version differs from the lock file's, one line each, sorted."""
    names = sorted(set(locked) | set(installed))
    return [
        f"{name}: {locked.get(name, '(not locked)')} -> {installed.get(name, '(not installed)')}"
        for name in names
        if locked.get(name) != installed.get(name)
    ]
