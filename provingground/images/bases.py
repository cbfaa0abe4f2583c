"""The base images, made here from Debian packages, that stand in for the Dockerfiles' ``FROM``.

* ``python:<3.11>-slim-<bookworm>``: ``debootstrap --variant=minbase`` with python3, python3-venv,
  python-is-python3 and ca-certificates; a virtual environment at ``/usr/local`` gives ``python``
  and ``pip`` on PATH as the official ``python`` images do (pip installs into ``/usr/local``).
* ``busybox:<1.37.0>``: the static busybox of the pinned ``busybox-static`` .deb, with each applet
  linked in ``/bin``, as the official ``busybox`` image.

Each is an OCI layout folder under the cache, named by a hash of its inputs, so it is made once.
The Python base's only site-specific content is the site's CA certificates
(``/usr/local/share/ca-certificates/``, added to the system store), the host's ``/etc/pip.conf``
and, when there are site CAs, ``/etc/uv/uv.toml`` with ``system-certs = true`` (uv, which hatch
runs, trusts only its bundled roots otherwise), so that ``RUN pip`` and uv work behind the site's
TLS-re-signing egress proxy; all are among its inputs (the cache key).
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from provingground.images import oci
from provingground.images.pins import HERE, Pins, fetch_pinned, lock_drift, parse_lock

__all__ = ["Base", "busybox_base", "python_base"]

SITE_CA_DIR = Path("/usr/local/share/ca-certificates")
PIP_CONF = Path("/etc/pip.conf")
# uv's system-wide settings file (https://docs.astral.sh/uv/concepts/configuration-files/) and
# the setting that makes it use the system's trust store
# (https://docs.astral.sh/uv/concepts/authentication/certificates/).
UV_TOML = Path("/etc/uv/uv.toml")
UV_SYSTEM_CERTS = b"system-certs = true\n"
LOCK = HERE / "python-base.lock"
_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Bumped when how a base is made changes, so a cached base made the old way is not reused.
_RECIPE = "3"


@dataclass(frozen=True)
class Base:
    """A base image in an OCI layout folder.

    Attributes:
        name: The name the Dockerfiles' ``FROM`` uses, e.g. ``python:3.11-slim-bookworm``.
        layout: The OCI layout folder.
        digest: Its manifest digest (what the named context pins).
        packages: Debian package versions in it (``name: version``).
    """

    name: str
    layout: Path
    digest: str
    packages: dict[str, str]


def _key(*parts: bytes) -> str:
    sha = hashlib.sha256()
    for part in (_RECIPE.encode(), *parts):
        sha.update(len(part).to_bytes(8, "big") + part)
    return sha.hexdigest()[:16]


def _cached(name: str, layout: Path) -> Base | None:
    if not (layout / "index.json").is_file():
        return None
    info = json.loads((layout.parent / (layout.name + ".json")).read_text())
    return Base(name, layout, info["digest"], info["packages"])


def _save(name: str, layout: Path, digest: str, packages: dict[str, str]) -> Base:
    (layout.parent / (layout.name + ".json")).write_text(
        json.dumps({"digest": digest, "packages": packages})
    )
    return Base(name, layout, digest, packages)


def _site_files() -> list[tuple[Path, bytes]]:
    cas = sorted(SITE_CA_DIR.glob("*.crt")) if SITE_CA_DIR.is_dir() else []
    found = [(path, path.read_bytes()) for path in cas]
    if PIP_CONF.is_file():
        found.append((PIP_CONF, PIP_CONF.read_bytes()))
    if cas:
        found.append((UV_TOML, UV_SYSTEM_CERTS))
    return found


def _not_dev(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Leave out device nodes and what debootstrap leaves in /proc, /sys, /dev and caches."""
    name = info.name
    if info.isdev() or info.isfifo():
        return None
    for folder in (
        "proc/",
        "sys/",
        "dev/",
        "run/",
        "tmp/",
        "var/cache/apt/",
        "var/lib/apt/lists/",
        "var/log/",
    ):
        if name.startswith(folder):
            return None
    if name.startswith(
        ("usr/share/doc/", "usr/share/man/", "usr/share/info/")
    ) and not name.endswith("/copyright"):
        return None
    info.uname = info.gname = ""
    return info


def python_base(pins: Pins, cache: Path, log: TextIO | None = None) -> Base:
    """Make (or reuse) the Python base from Debian packages with debootstrap.

    Args:
        pins: The pinned inputs (suite, mirror, packages).
        cache: The cache folder; the base goes to ``cache/bases/``.
        log: Where to write the lines that say which packages differ from ``python-base.lock``.

    Returns:
        The base, with the versions of the Debian packages installed in it.

    Raises:
        subprocess.CalledProcessError: debootstrap or a step in the new root failed.
    """
    site = _site_files()
    key = _key(
        pins.debian_suite.encode(),
        pins.debian_mirror.encode(),
        pins.python_base_packages.encode(),
        *(str(p).encode() + b"\0" + data for p, data in site),
    )
    name = pins.python_base_name
    layout = cache / "bases" / f"python-{pins.python_base_version}-{pins.debian_suite}-{key}"
    if found := _cached(name, layout):
        return found
    layout.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=layout.parent, prefix="rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={pins.python_base_packages}",
                pins.debian_suite,
                str(root),
                pins.debian_mirror,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for path, data in site:
            dest = (
                root / "usr/local/share/ca-certificates" / path.name
                if path.parent == SITE_CA_DIR
                else root / path.relative_to("/")
            )
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        chroot = ["chroot", str(root)]
        subprocess.run([*chroot, "update-ca-certificates"], check=True, capture_output=True)
        # `python`, `pip` in /usr/local/bin, installing into /usr/local, as the official images.
        subprocess.run([*chroot, "python3", "-m", "venv", "/usr/local"], check=True)
        query = [*chroot, "dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]
        lines = subprocess.run(query, check=True, capture_output=True, text=True).stdout.split()
        packages = dict(line.split("=", 1) for line in lines)
        # debootstrap copies the build machine's name and DNS settings; the runtime gives its own.
        for host_file in ("etc/hostname", "etc/resolv.conf"):
            (root / host_file).unlink(missing_ok=True)
            (root / host_file).write_text("")
        config = {"Env": [_PATH, "LANG=C.UTF-8"], "Cmd": ["python3"]}
        annotations = {
            "org.opencontainers.image.ref.name": name,
            "org.opencontainers.image.description": (
                f"Stand-in for {name}: debootstrap --variant=minbase {pins.debian_suite} from "
                f"{pins.debian_mirror} with {pins.python_base_packages}, "
                "plus the site's CA, pip.conf and uv.toml"
            ),
        }
        digest = oci.write_layout(
            root, layout, config=config, annotations=annotations, skip=_not_dev
        )
    if log is not None and LOCK.is_file():
        locked = parse_lock(LOCK.read_text())
        for line in lock_drift(locked, packages):
            log.write(f"images: {name}: Debian package differs from python-base.lock: {line}\n")
    return _save(name, layout, digest, packages)


def _ar_member(deb: bytes, prefix: str) -> tuple[str, bytes]:
    """The first member of an ar archive (a .deb) whose name starts with ``prefix``."""
    if not deb.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive (a .deb)")
    pos = 8
    while pos + 60 <= len(deb):
        header = deb[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        if name.startswith(prefix):
            return name, deb[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size & 1)
    raise ValueError(f"no {prefix}* member in the .deb")


def busybox_binary(deb: Path) -> bytes:
    """The static busybox binary inside a ``busybox-static`` .deb (``data.tar.xz``)."""
    member, data = _ar_member(deb.read_bytes(), "data.tar")
    if member.endswith(".xz"):
        data = lzma.decompress(data)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for info in tar:
            if info.isfile() and info.name.endswith("bin/busybox"):
                f = tar.extractfile(info)
                if f is not None:
                    return f.read()
    raise ValueError(f"{deb}: no bin/busybox in {member}")


def busybox_base(pins: Pins, cache: Path) -> Base:
    """Make (or reuse) the busybox base from the pinned ``busybox-static`` .deb (sha256 checked).

    Raises:
        PinMismatchError: The downloaded .deb is not the pinned one.
    """
    name = pins.busybox_base_name
    layout = (
        cache / "bases" / f"busybox-{pins.busybox_version}-{_key(pins.busybox_deb_sha256.encode())}"
    )
    if found := _cached(name, layout):
        return found
    layout.parent.mkdir(parents=True, exist_ok=True)
    deb = fetch_pinned(pins.busybox_deb_url, pins.busybox_deb_sha256, cache / "downloads")
    with tempfile.TemporaryDirectory(dir=layout.parent, prefix="rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        (root / "bin").mkdir(parents=True)
        busybox = root / "bin" / "busybox"
        busybox.write_bytes(busybox_binary(deb))
        busybox.chmod(0o755)
        applets = subprocess.run(
            [str(busybox), "--list"], check=True, capture_output=True, text=True
        ).stdout
        for applet in sorted(set(applets.split()) - {"busybox"}):
            (root / "bin" / applet).hardlink_to(busybox)
        for folder, mode in (
            ("etc", 0o755),
            ("root", 0o700),
            ("tmp", 0o1777),
            ("home", 0o755),
            ("var", 0o755),
        ):
            (root / folder).mkdir(exist_ok=True)
            (root / folder).chmod(mode)
        (root / "etc/passwd").write_text(
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
        )
        (root / "etc/group").write_text("root:x:0:\nnobody:x:65534:\n")
        config = {"Env": [_PATH], "Cmd": ["sh"]}
        annotations = {
            "org.opencontainers.image.ref.name": name,
            "org.opencontainers.image.description": f"Stand-in for {name}: {pins.busybox_deb_url}",
        }
        digest = oci.write_layout(root, layout, config=config, annotations=annotations)
    deb_version = pins.busybox_deb_url.rsplit("/", 1)[-1].split("_")[1]
    return _save(name, layout, digest, {"busybox-static": deb_version})


def remove_stale(cache: Path, keep: list[Base]) -> None:
    """Delete base layouts in the cache other than ``keep`` (older inputs)."""
    wanted = {b.layout.name for b in keep}
    for path in (cache / "bases").glob("*"):
        stem = path.name.removesuffix(".json").removesuffix(".partial")
        if stem not in wanted and not path.name.startswith("rootfs-"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
