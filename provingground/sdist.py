"""A pinned source distribution from the package index, fetched as it is: no pip, no build.

``pip download --no-binary :all:`` prepares an sdist's metadata before it saves it, and that
builds the sdist's build dependencies from source as well: minutes on a machine with no pip
cache, for a file the proving ground only unpacks. The index's JSON simple API (PEP 691) names
the file and its sha256; the file is fetched, checked against the pin and renamed into place
whole. The index is ``$PIP_INDEX_URL`` (default PyPI's), verified with ``$PIP_CERT`` where set
(else the system's CAs); proxies come from the usual environment variables. Standard library only.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import cast

from .images.pins import sha256_file

__all__ = ["FetchError", "fetch_sdist", "index_url"]

_JSON = "application/vnd.pypi.simple.v1+json"
_TIMEOUT = 120.0


class FetchError(RuntimeError):
    """The sdist could not be fetched, or is not the pinned file."""


def index_url() -> str:
    """The package index's simple API root (pip's own setting, else PyPI's)."""
    return (os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple").rstrip("/")


def _context() -> ssl.SSLContext:
    cafile = os.environ.get("PIP_CERT")
    return ssl.create_default_context(cafile=cafile if cafile and Path(cafile).is_file() else None)


def _open(url: str, accept: str) -> http.client.HTTPResponse:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        response = urllib.request.urlopen(request, timeout=_TIMEOUT, context=_context())
        return cast("http.client.HTTPResponse", response)
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"Cannot read {url}: {exc}") from exc


def fetch_sdist(project: str, version: str, sha256: str, dest: Path) -> Path:
    """``dest/<project>-<version>.tar.gz``, downloaded once and checked against ``sha256``.

    Raises:
        FetchError: the index cannot be read, lists no such sdist, lists another sha256 for it,
            or served bytes of another sha256.
    """
    filename = f"{re.sub(r'[-_.]+', '_', project).lower()}-{version}.tar.gz"
    archive = dest / filename
    if archive.is_file() and sha256_file(archive) == sha256:
        return archive
    page = f"{index_url()}/{re.sub(r'[-_.]+', '-', project).lower()}/"
    with _open(page, _JSON) as response:
        try:
            files = json.load(response)["files"]
        except (ValueError, KeyError, TypeError) as exc:
            raise FetchError(f"{page} is not a PEP 691 JSON page: {exc}") from exc
    entry = next((f for f in files if isinstance(f, dict) and f.get("filename") == filename), None)
    if entry is None:
        raise FetchError(f"{page} lists no {filename}")
    listed = (entry.get("hashes") or {}).get("sha256")
    if listed and listed != sha256:
        raise FetchError(f"{page} lists {filename} with sha256 {listed}, not the pinned {sha256}")
    url = urllib.parse.urljoin(page, str(entry.get("url", "")))
    dest.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    digest = hashlib.sha256()
    try:
        with _open(url, "*/*") as response, partial.open("wb") as out:
            for block in iter(lambda: response.read(1 << 16), b""):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != sha256:
            raise FetchError(f"{url} served sha256 {digest.hexdigest()}, not the pinned {sha256}")
        partial.rename(archive)
    finally:
        partial.unlink(missing_ok=True)
    return archive
