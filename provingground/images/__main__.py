"""``make images``: build the images as OCI archives into ``.images/``, with their catalog.

    python -m provingground.images --buildkit DIR --runc PATH [--out .images] [--only NAME ...]

Makes (or reuses) the stand-in bases, starts buildkitd (root, own state under the cache, own
socket), builds each image with buildctl, stops buildkitd, and writes ``.images/images.json``
(:mod:`provingground.images.catalog`). Failures print one line and exit 1; buildctl's output is in
``.images/logs/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

from provingground.images import bases, build, oci
from provingground.images.buildkitd import BuildkitdError, buildkitd
from provingground.images.catalog import IMAGE_NAMES, REPO_ROOT, Image
from provingground.images.pins import PinMismatchError, Pins, check_sha256, read_pins
from provingground.sdist import FetchError, fetch_sdist


class ImagesError(RuntimeError):
    """A step of ``make images`` failed; the message is the one line to print."""


def default_cache() -> Path:
    """``$DGP_CACHE/images`` (default ``~/.cache/dask-gpu-parity/images``), outside the clone."""
    return (
        Path(os.environ.get("DGP_CACHE") or Path.home() / ".cache" / "dask-gpu-parity") / "images"
    )


def _sdist(pins: Pins, cache: Path) -> Path:
    """Download (once, sha256 checked) and unpack the dask-kubernetes sdist; its top folder."""
    version = pins.dask_kubernetes_version
    top = cache / "sources" / f"dask_kubernetes-{version}-{pins.dask_kubernetes_sdist_sha256[:12]}"
    if (top / "PKG-INFO").is_file():
        return top
    downloads = cache / "downloads" / pins.dask_kubernetes_sdist_sha256
    downloads.mkdir(parents=True, exist_ok=True)
    archive = downloads / f"dask_kubernetes-{version}.tar.gz"
    if not archive.is_file():
        fetch_sdist("dask-kubernetes", version, pins.dask_kubernetes_sdist_sha256, downloads)
    check_sha256(archive, pins.dask_kubernetes_sdist_sha256, what=archive.name)
    partial = top.with_name(top.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(partial, filter="data")
    (partial / f"dask_kubernetes-{version}").rename(top)
    partial.rmdir()
    return top


def _dask_versions() -> tuple[str, str]:
    return importlib.metadata.version("dask"), importlib.metadata.version("distributed")


def _previous(out: Path) -> dict[str, dict[str, object]]:
    try:
        images: dict[str, dict[str, object]] = json.loads((out / "images.json").read_text())[
            "images"
        ]
    except (OSError, ValueError, KeyError):
        return {}
    return images


def _build_one(
    buildctl: list[str], spec: build.Spec, all_bases: dict[str, bases.Base], out: Path
) -> float:
    archive = out / f"{spec.name}.tar"
    partial = archive.with_name(archive.name + ".partial")
    log = out / "logs" / f"{spec.name}.log"
    start = time.monotonic()
    with log.open("wb") as f:
        rc = subprocess.run(
            [*buildctl, *build.buildctl_args(spec, all_bases, partial)],
            check=False,
            stdout=f,
            stderr=f,
        ).returncode
    if rc != 0:
        partial.unlink(missing_ok=True)
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise ImagesError(f"images: {spec.name}: buildctl failed ({tail[0]}); see {log}")
    partial.chmod(0o644)
    partial.rename(archive)
    return time.monotonic() - start


def run(
    out: Path, buildkit: Path, runc: Path, only: Sequence[str], cache: Path
) -> dict[str, Image]:
    """Build the images named in ``only`` (all if empty) and rewrite the catalog.

    Raises:
        ImagesError: A step failed (the message says which and where its log is).
    """
    pins = read_pins()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    python = bases.python_base(pins, cache, sys.stderr)
    busybox = bases.busybox_base(pins, cache)
    bases.remove_stale(cache, [python, busybox])
    sdist = _sdist(pins, cache)
    text, rewritten = build.rewrite_froms(
        (sdist / build.DASK_OPERATOR_DOCKERFILE).read_text(), python.name
    )
    dask_operator_dockerfile = (
        cache / "sources" / f"dask-operator-{pins.dask_kubernetes_version}.Dockerfile"
    )
    dask_operator_dockerfile.write_text(text)
    print(
        f"images: bases ready in {time.monotonic() - t0:.1f}s: {python.name} {busybox.name}",
        flush=True,
    )
    all_bases = {python.name: python, busybox.name: busybox}
    wanted = [
        s
        for s in build.specs(REPO_ROOT, pins, sdist, dask_operator_dockerfile, _dask_versions())
        if not only or s.name in only
    ]
    previous = _previous(out)
    built: dict[str, Image] = {}
    buildctl = [str(buildkit / "buildctl")]
    with buildkitd(buildkit, runc, cache / "buildkit", log=out / "logs" / "buildkitd.log") as addr:
        for spec in wanted:
            seconds = _build_one([*buildctl, f"--addr={addr}"], spec, all_bases, out)
            archive = out / f"{spec.name}.tar"
            layout = oci.read_archive(archive)
            old = previous.get(spec.name, {})
            unpacked = old.get("unpacked_bytes") if old.get("digest") == layout.digest else None
            base = {name: all_bases[name].digest for name in spec.bases}
            if spec.name == "dask-operator":
                base.update(
                    {f"{old_name} (rewritten to)": new for old_name, new in rewritten.items()}
                )
            built[spec.name] = Image(
                name=spec.name,
                reference=spec.reference,
                archive=archive,
                digest=layout.digest,
                compressed_bytes=layout.compressed_size,
                unpacked_bytes=int(unpacked)
                if isinstance(unpacked, int)
                else oci.unpacked_size(archive),
                build_seconds=seconds,
                base=base,
            )
            mib = layout.compressed_size / 2**20
            print(
                f"images: {spec.name} {spec.reference} {mib:.1f} MiB in {seconds:.1f}s", flush=True
            )
    _write_catalog(out, pins, built, previous, [python, busybox])
    return built


def _write_catalog(
    out: Path,
    pins: Pins,
    built: dict[str, Image],
    previous: dict[str, dict[str, object]],
    used: list[bases.Base],
) -> None:
    images: dict[str, object] = {
        n: e for n, e in previous.items() if n in IMAGE_NAMES and n not in built
    }
    images.update({name: image.to_json(out) for name, image in built.items()})
    data = {
        "images": dict(sorted(images.items())),
        "bases": {b.name: {"digest": b.digest, "packages": b.packages} for b in used},
        "buildkit": pins.buildkit_version,
        "pins": dataclasses.asdict(pins),
    }
    tmp = out / "images.json.partial"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.rename(out / "images.json")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m provingground.images", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / ".images", help="where the archives go"
    )
    parser.add_argument(
        "--buildkit", type=Path, required=True, help="folder with buildkitd and buildctl"
    )
    parser.add_argument("--runc", type=Path, required=True, help="the runc binary for RUN steps")
    parser.add_argument(
        "--only", nargs="*", choices=IMAGE_NAMES, default=[], help="build only these images"
    )
    args = parser.parse_args(argv)
    for tool in (args.buildkit / "buildkitd", args.buildkit / "buildctl", args.runc):
        if not os.access(tool, os.X_OK):
            hint = (
                "`make node` builds the real node's runc"
                if tool == args.runc
                else "`make images` builds it"
            )
            print(f"images: {tool} not found or not executable; {hint}", file=sys.stderr)
            return 1
    if os.geteuid() != 0:
        print(
            "images: buildkitd and debootstrap need root; run `make images` as root",
            file=sys.stderr,
        )
        return 1
    t0 = time.monotonic()
    try:
        run(
            args.out.resolve(),
            args.buildkit.resolve(),
            args.runc.resolve(),
            args.only,
            default_cache(),
        )
    except (ImagesError, BuildkitdError, PinMismatchError, FetchError) as exc:
        print(exc, file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        print(
            f"images: {' '.join(map(str, exc.cmd))[:200]} exited with {exc.returncode}",
            file=sys.stderr,
        )
        return 1
    print(f"images: done in {time.monotonic() - t0:.1f}s -> {args.out}/images.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
