"""Release steps of ``.github/workflows/release.yml`` that can be tested here (docs/releasing.md).

``python3 scripts/release.py check-version v0.1.0`` checks a release tag against the versions in
``pyproject.toml`` and the chart's ``Chart.yaml`` and prints ``version=0.1.0`` (for
``$GITHUB_OUTPUT``). ``python3 scripts/release.py pin-digests --operator sha256:... --probe
sha256:...`` pins the pushed images' digests into the chart: ``image.digest`` and
``probeImage.digest`` in ``values.yaml``, and ``repository:tag@digest`` in the Artifact Hub
``artifacthub.io/images`` annotation of ``Chart.yaml``.

The edits are line edits: every other byte of both files, comments included, stays as it is. Both
files are written to temporary files first and renamed into place only when both edits
succeeded, so a failure leaves the chart untouched. Standard library only: the workflow runs it
with the runner's ``python3``. Exit codes: 0 done, 1 the tag does not match the versions, 2 bad
input (a malformed tag or digest, or a chart that lacks a field to pin), with one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "dask-gpu-parity"
# The values.yaml blocks pinned, and the images they name: (top-level key, what it is).
IMAGES = (("image", "operator"), ("probeImage", "probe"))
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_ANY = "sha256:" + "0" * 64  # a well-formed digest, for checking that a chart can be pinned
# A release tag: v and a semantic version (a pre-release such as -rc.1 allowed).
TAG = re.compile(r"v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)")
_KEY = re.compile(r"^(?P<key>[A-Za-z][\w-]*):(?P<rest>.*)$")
_CHILD = re.compile(r"^  (?P<key>[A-Za-z]\w*):(?P<pad>[ \t]*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s#]*)")


class ReleaseError(Exception):
    """Bad input: printed as one line, exit code 2."""


class VersionMismatchError(Exception):
    """The tag is not the version of the sources: exit code 1."""


@dataclass(frozen=True)
class _Field:
    """One ``  key: value`` line in a top-level block of a YAML file."""

    line: int
    value: str
    start: int  # offset of the value in the line
    end: int


def _scalar(text: str) -> str:
    """A plain or quoted YAML scalar, without quotes and a trailing comment."""
    text = text.strip()
    if text[:1] in "\"'" and len(text) > 1 and text[-1] == text[0]:
        return text[1:-1]
    return text.split(" #", 1)[0].strip()


def _top_level(lines: Sequence[str], name: str, key: str) -> str:
    """The top-level scalar ``key`` of a YAML file's lines, or a ReleaseError."""
    for line in lines:
        match = _KEY.match(line)
        if match and match["key"] == key and match["rest"].strip():
            return _scalar(match["rest"])
    raise ReleaseError(f"{name} has no top-level {key}: add it")


def _block(lines: Sequence[str], name: str, block: str) -> dict[str, _Field]:
    """The two-space-indented scalar children of top-level ``block``: key -> field."""
    start = next(
        (i for i, line in enumerate(lines) if re.match(rf"{block}:\s*(#.*)?$", line)), None
    )
    if start is None:
        raise ReleaseError(f"{name} has no top-level {block}: block")
    fields: dict[str, _Field] = {}
    for number in range(start + 1, len(lines)):
        line = lines[number]
        if line[:1] not in ("", " ", "\t", "#", "\n"):
            break  # the next top-level key
        if match := _CHILD.match(line):
            fields[match["key"]] = _Field(
                number, _scalar(match["value"]), match.start("value"), match.end("value")
            )
    return fields


def check_version(tag: str, root: Path = ROOT) -> str:
    """The version of release tag ``tag``; raise unless pyproject and Chart.yaml say the same.

    The chart must also have every field that ``pin-digests`` will pin: this runs before the
    images are pushed, that after.

    Raises:
        ReleaseError: the tag is not v and a semantic version, or the chart lacks a field to pin.
        VersionMismatchError: a version differs from the tag's.
    """
    match = TAG.fullmatch(tag)
    if match is None:
        raise ReleaseError(f"Tag {tag!r} is not a release tag: expected v and X.Y.Z, e.g. v0.1.0")
    version = match[1]
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    except (tomllib.TOMLDecodeError, KeyError) as exc:
        raise ReleaseError(f"pyproject.toml has no readable [project] table: {exc}") from exc
    if "version" not in project:
        raise ReleaseError("pyproject.toml has no project.version: add it")
    chart = (root / "charts" / "dask-gpu-parity" / "Chart.yaml").read_text(encoding="utf-8")
    lines = chart.splitlines()
    found = {
        "pyproject.toml project.version": str(project["version"]),
        "Chart.yaml version": _top_level(lines, "Chart.yaml", "version"),
        "Chart.yaml appVersion": _top_level(lines, "Chart.yaml", "appVersion"),
    }
    wrong = [f"{where} is {value}" for where, value in found.items() if value != version]
    if wrong:
        raise VersionMismatchError(
            f"Tag {tag} does not match the sources: {'; '.join(wrong)}; "
            f"bump them to {version} or tag v{found['pyproject.toml project.version']}"
        )
    # What the chart job will pin once the images are pushed must be there before anything is.
    _pinned(root / "charts" / "dask-gpu-parity", dict.fromkeys(("operator", "probe"), _ANY))
    return version


def _digest(what: str, digest: str) -> str:
    if not DIGEST.fullmatch(digest):
        raise ReleaseError(
            f"The {what} digest {digest!r} is not an image digest: "
            "expected sha256: and 64 lowercase hex digits"
        )
    return digest


def pin(chart: Path, digests: dict[str, str]) -> list[str]:
    """Pin ``digests`` (operator, probe) into ``chart``; return the references pinned.

    Raises:
        ReleaseError: a malformed digest, or a chart without a field to pin (nothing written).
    """
    pinned, contents = _pinned(chart, digests)
    replace_all({path: text.encode("utf-8") for path, text in contents.items()})
    return pinned


def _pinned(chart: Path, digests: dict[str, str]) -> tuple[list[str], dict[Path, str]]:
    """The references pinned, and the new text of each file, without writing anything."""
    digests = {what: _digest(what, digest) for what, digest in digests.items()}
    values_path, chart_path = chart / "values.yaml", chart / "Chart.yaml"
    for path in (values_path, chart_path):
        if not path.is_file():
            raise ReleaseError(f"{path} not found: is {chart} the chart's folder?")
    values = values_path.read_text(encoding="utf-8").splitlines(keepends=True)
    meta = chart_path.read_text(encoding="utf-8").splitlines(keepends=True)
    app_version = _top_level(meta, "Chart.yaml", "appVersion")
    pinned = []
    for block, what in IMAGES:
        fields = _block(values, "values.yaml", block)
        for key in ("repository", "digest"):
            if key not in fields:
                raise ReleaseError(f"values.yaml has no {block}.{key}: add it")
        digest, field = digests[what], fields["digest"]
        line = values[field.line]
        values[field.line] = f'{line[: field.start]}"{digest}"{line[field.end :]}'
        tag = fields["tag"].value if "tag" in fields else ""
        reference = f"{fields['repository'].value}:{tag or app_version}"
        _pin_annotation(meta, reference, digest)
        pinned.append(f"{reference}@{digest}")
    return pinned, {values_path: "".join(values), chart_path: "".join(meta)}


def _pin_annotation(meta: list[str], reference: str, digest: str) -> None:
    """Give ``reference``'s one line in the artifacthub.io/images annotation the digest."""
    line_re = re.compile(rf"^(\s+(?:-\s+)?image:\s+){re.escape(reference)}(@{DIGEST.pattern})?\s*$")
    hits = [i for i, line in enumerate(meta) if line_re.match(line)]
    if len(hits) != 1:
        raise ReleaseError(
            f"Chart.yaml's artifacthub.io/images names {reference} {len(hits)} times, "
            "expected once: list each image of values.yaml with the chart's appVersion as its tag"
        )
    (i,) = hits
    match = line_re.match(meta[i])
    assert match is not None  # matched above
    ending = "\n" if meta[i].endswith("\n") else ""
    meta[i] = f"{match[1]}{reference}@{digest}{ending}"


def replace_all(contents: dict[Path, bytes], mode: int | None = None) -> None:
    """Write every file to a temporary file beside it, then rename them all into place.

    A failure leaves every file as it was and no temporary file behind.

    Args:
        contents: each file's new bytes.
        mode: the files' permission bits; ``None`` keeps each existing file's.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in contents.items():
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            staged.append((temp, path))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, path.stat().st_mode & 0o777 if mode is None else mode)
        for temp, path in staged:
            os.replace(temp, path)
    finally:
        for temp, _ in staged:
            if os.path.exists(temp):
                os.unlink(temp)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one release step; return the exit code."""
    parser = argparse.ArgumentParser(prog="release.py", description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    version = steps.add_parser("check-version", help="check a v* tag against the sources")
    version.add_argument("tag", help="the release tag, e.g. v0.1.0")
    digests = steps.add_parser("pin-digests", help="pin image digests into the chart")
    digests.add_argument("--operator", required=True, help="the operator image's digest")
    digests.add_argument("--probe", required=True, help="the probe image's digest")
    digests.add_argument("--chart", type=Path, default=CHART, help="the chart's folder")
    args = parser.parse_args(argv)
    try:
        if args.step == "check-version":
            print(f"version={check_version(args.tag)}")
        else:
            for reference in pin(args.chart, {"operator": args.operator, "probe": args.probe}):
                print(f"Pinned {reference}")
    except VersionMismatchError as exc:
        print(f"release.py: {exc}", file=sys.stderr)
        return 1
    except (ReleaseError, OSError) as exc:
        print(f"release.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
