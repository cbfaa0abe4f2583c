"""``fix``: the engine's fixes written back, to stdout or into the files (``--in-place``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TextIO

from dask_gpu_parity.core.findings import Severity
from dask_gpu_parity.manifests import STDIN, FileError, InputError, render_fixed, write_in_place
from dask_gpu_parity.manifests.inplace import escaping_link
from dask_gpu_parity.manifests.report import printable

from .args import FixArgs
from .inputs import evaluate_all, load_cluster, load_inputs, load_policy

__all__ = ["fix"]

EXIT_OK, EXIT_USAGE = 0, 2


def fix(args: FixArgs, out: TextIO, err: TextIO) -> int:
    """Fix every input; to stdout nothing is written unless every input could be read."""
    paths = args.inputs.paths
    if args.in_place and STDIN in paths:
        raise InputError("fix: --in-place cannot rewrite stdin; drop - or --in-place")
    policy = load_policy(args.inputs)
    classes, inventory = load_cluster(args.inputs, err)
    inputs = load_inputs(args.inputs, regular_only=args.in_place)
    errors: list[FileError] = list(inputs.errors)
    if errors and not args.in_place:  # a stream with a file left out would lose it
        _report(errors, err)
        return EXIT_USAGE
    checked = evaluate_all(inputs.documents, policy, inventory, classes)
    by_source: dict[int, dict[int, list[tuple[str, list[Any]]]]] = {}
    for c in checked:
        patch = c.result.patch
        if patch:
            entry = by_source.setdefault(id(c.document.source), {})
            entry.setdefault(c.document.index, []).append((c.document.prefix, patch))
    remaining = sum(
        not f.fixable and f.severity is Severity.ERROR for c in checked for f in c.result.findings
    )
    texts: list[str] = []
    changed = unchanged = 0
    folders = [p for p in paths if p != STDIN and os.path.isdir(p)]
    for source, _ in inputs.parsed:
        try:
            text = render_fixed(source, by_source.get(id(source), {}))
            if not args.in_place:
                texts.append(text if text.endswith("\n") or not text else text + "\n")
            elif text == source.text:
                unchanged += 1
            else:
                _refuse_escaping_link(source.name, paths, folders)
                how = write_in_place(source.name, text, bom=source.bom)
                changed += 1
                err.write(printable(f"fixed {source.display}") + _how(how) + "\n")
        except FileError as exc:
            errors.append(exc)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            errors.append(FileError(source.display, f"cannot write it: {reason}"))
    if errors:
        _report(errors, err)
    if not args.in_place:
        if errors:
            return EXIT_USAGE
        out.write("".join(texts))
    else:
        err.write(f"{changed} file(s) fixed, {unchanged} left unchanged\n")
    if remaining:
        err.write(f"{remaining} error(s) need a change by hand: run dask-gpu-parity check\n")
    return EXIT_USAGE if errors else EXIT_OK


def _refuse_escaping_link(name: str, named: Sequence[str], folders: list[str]) -> None:
    """A FileError for a symlink met in a folder walk that leads out of the folder."""
    is_named = os.path.normpath(name) in {os.path.normpath(n) for n in named}
    escape = None if is_named else escaping_link(name, folders)
    if escape is not None:
        target, folder = escape
        raise FileError(
            name,
            f"a symbolic link to {target}, outside {folder}: not written; name the link or its "
            "target to fix it",
        )


def _how(how: str) -> str:
    return " (overwritten in place)" if how == "overwritten" else ""


def _report(errors: list[FileError], err: TextIO) -> None:
    for error in errors:
        err.write(printable(f"error: {error} [{error.code}]") + "\n")
