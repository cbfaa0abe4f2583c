"""``check``: every input's findings, and the files that could not be checked, in one report."""

from __future__ import annotations

from typing import TextIO

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.manifests import STDIN, FileError, locate
from dask_gpu_parity.manifests.locate import SharedLines
from dask_gpu_parity.manifests.report import Located, render, resource_label, summary

from .args import CheckArgs
from .inputs import findings_all, load_cluster, load_inputs, load_policy

__all__ = ["check"]


def _file_finding(error: FileError, stdin_filename: str) -> Located:
    unnamed_stdin = error.file == "<stdin>" and not stdin_filename
    finding = Finding.of(error.code, "", error.detail)
    path = None if unnamed_stdin else error.file
    return Located(
        finding=finding,
        kind="",
        name="",
        namespace="",
        file=error.file,
        document=0,
        line=error.line,
        path=path,
    )


def check(args: CheckArgs, err: TextIO | None = None) -> tuple[str, int]:
    """The report and the exit code (0 or 1; ``--exit-zero`` makes it 0).

    Warnings about the ``--nodes`` file (what its slices leave unresolved) go to ``err``.
    """
    policy = load_policy(args.inputs)
    classes, inventory = load_cluster(args.inputs, err)
    inputs = load_inputs(args.inputs)
    stdin_filename = args.inputs.stdin_filename
    documents = inputs.documents
    checked = findings_all(documents, policy, inventory, classes)

    lines = SharedLines()  # documents stamped from one template: their lines found once

    def path_of(name: str) -> str | None:
        return (stdin_filename or None) if name == STDIN else name

    items = [
        Located(
            finding=finding,
            kind=c.dask.kind,
            name=c.dask.name,
            namespace=c.dask.namespace,
            file=c.document.source.display,
            document=c.document.index + 1,
            line=locate(c.document, finding.path, lines),
            path=path_of(c.document.source.name),
        )
        for c in checked
        for finding in c.findings
    ]
    items += [_file_finding(e, stdin_filename) for e in [*inputs.errors, *inputs.notices]]
    counts = summary(items, len(checked), len(documents), len(inputs.parsed) + len(inputs.errors))
    labels = [
        (c.document.source.display, resource_label(c.dask.kind, c.dask.namespace, c.dask.name))
        for c in checked
    ]
    report = render(args.output, items, counts, labels)
    failed = any(i.finding.severity >= args.fail_on for i in items) and not args.exit_zero
    return report, int(failed)
