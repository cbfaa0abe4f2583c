"""The krew plugin's release assets, for ``.github/workflows/release.yml`` (docs/releasing.md).

``python3 scripts/krew.py --tag v0.1.0 --repository OWNER/NAME --out assets/`` writes two files
into ``assets/``:

- ``kubectl-dask_gpu_parity.tar.gz``: the launcher ``plugins/krew/kubectl-dask_gpu_parity``
  (mode 0755) and ``LICENSE`` (0644), built reproducibly: fixed order, owners, modes and
  modification times, gzip without a name or time, so the same sources give the same bytes.
- ``dask-gpu-parity.yaml``: the krew manifest rendered from the template
  ``plugins/krew/dask-gpu-parity.yaml``, whose ``"@VERSION@"``, ``"@URI@"`` and ``"@SHA256@"``
  become the tag, the archive's download URL on the tag's GitHub release, and the archive's
  sha256; its header comment becomes one that says what was rendered, and how to install it.

Both are written to temporary files and renamed into place once both are complete, so a failure
leaves no half-written asset. Standard library only: the workflow runs it with the runner's
``python3``. Exit codes: 0 done, 2 bad input (a malformed tag or repository, a template without
its placeholders, an unreadable source or unwritable folder), with one line on stderr.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import re
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path

# release.py beside this file, whether it runs as ``python3 scripts/krew.py`` or is loaded by path.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from release import TAG, replace_all

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugins" / "krew"
LAUNCHER = "kubectl-dask_gpu_parity"
ARCHIVE = f"{LAUNCHER}.tar.gz"
MANIFEST = "dask-gpu-parity.yaml"
# The archive's members: name in the archive, source, mode. Sorted by name.
MEMBERS = (("LICENSE", ROOT / "LICENSE", 0o644), (LAUNCHER, PLUGIN / LAUNCHER, 0o755))
# A fixed modification time for every member (2020-01-01T00:00:00Z): the archive depends on the
# files' bytes only, not on when they were checked out.
MTIME = 1577836800
# A GitHub repository, as $GITHUB_REPOSITORY names it: owner/name.
REPOSITORY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
# The template's quoted placeholders, in the order of the values render() fills in.
PLACEHOLDERS = ('"@VERSION@"', '"@URI@"', '"@SHA256@"')


class KrewError(Exception):
    """Bad input: printed as one line, exit code 2."""


def archive() -> bytes:
    """The plugin's ``.tar.gz``: the same bytes for the same launcher and LICENSE."""
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, source, mode in MEMBERS:
            data = source.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    # No file name and mtime 0 in the gzip header; level 9 as tarfile's w:gz.
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, compresslevel=9, mtime=0) as gz:
        gz.write(tar_bytes.getvalue())
    return packed.getvalue()


def download_url(repository: str, tag: str, asset: str = ARCHIVE) -> str:
    """Where GitHub serves ``asset`` of ``tag``'s release of ``repository``."""
    return f"https://github.com/{repository}/releases/download/{tag}/{asset}"


def render(template: str, tag: str, repository: str, sha256: str) -> str:
    """The manifest: ``template`` with the tag, the archive's URL and its sha256 filled in.

    Raises:
        KrewError: a malformed tag or repository, or a placeholder not exactly once in the
            template.
    """
    if TAG.fullmatch(tag) is None:
        raise KrewError(f"Tag {tag!r} is not a release tag: expected v and X.Y.Z, e.g. v0.1.0")
    if REPOSITORY.fullmatch(repository) is None:
        raise KrewError(
            f"Repository {repository!r} is not a GitHub repository: expected OWNER/NAME, "
            "as $GITHUB_REPOSITORY names it"
        )
    counts = {p: template.count(p) for p in PLACEHOLDERS}
    if wrong := [f"{p} {n} times" for p, n in counts.items() if n != 1]:
        raise KrewError(
            f"The krew template has {', '.join(wrong)}: expected each of "
            f"{', '.join(PLACEHOLDERS)} once, in spec.version, uri and sha256"
        )
    values = (tag, download_url(repository, tag), sha256)
    for placeholder, value in zip(PLACEHOLDERS, values, strict=True):
        template = template.replace(placeholder, f'"{value}"')
    # The template's header comment is about the template: the manifest gets its own.
    body = template.splitlines(keepends=True)
    while body and body[0].startswith("#"):
        body.pop(0)
    header = (
        f"# krew plugin manifest of dask-gpu-parity {tag}, rendered by scripts/krew.py from\n"
        f"# plugins/krew/{MANIFEST}. Install it with\n"
        f"#   kubectl krew install --manifest-url={download_url(repository, tag, MANIFEST)}\n"
    )
    return header + "".join(body)


def build(tag: str, repository: str, out: Path, template: Path = PLUGIN / MANIFEST) -> list[Path]:
    """Write the archive and the rendered manifest into ``out``; return their paths.

    Raises:
        KrewError: bad input (nothing written).
        OSError: a source cannot be read or ``out`` written (nothing left half-written).
    """
    packed = archive()
    manifest = render(
        template.read_text(encoding="utf-8"), tag, repository, hashlib.sha256(packed).hexdigest()
    )
    out.mkdir(parents=True, exist_ok=True)
    contents = {out / ARCHIVE: packed, out / MANIFEST: manifest.encode("utf-8")}
    replace_all(contents, mode=0o644)
    return list(contents)


def main(argv: Sequence[str] | None = None) -> int:
    """Build the krew assets; return the exit code."""
    parser = argparse.ArgumentParser(prog="krew.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", required=True, help="the release tag, e.g. v0.1.0")
    parser.add_argument(
        "--repository",
        default="dask-gpu-parity/dask-gpu-parity",
        help="the GitHub repository whose release serves the archive (OWNER/NAME)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the folder to write into")
    args = parser.parse_args(argv)
    try:
        for path in build(args.tag, args.repository, args.out):
            print(f"Wrote {path}")
    except (KrewError, OSError) as exc:
        print(f"krew.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
