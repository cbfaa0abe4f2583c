"""``check``: every input's findings, and the files that could not be checked, in one report."""

from __future__ import annotations

import argparse

from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.manifests import STDIN, FileError, locate
from dask_gpu_parity.manifests.report import Located, render, resource_label, summary

from .inputs import evaluate_all, load_inputs, load_inventory, load_policy

__all__ = ["check"]


def _file_finding(error: FileError, stdin_filename: str) -> Located:
    unnamed_stdin = error.file == "<stdin>" and not stdin_filename
    finding = Finding.of(error.code, "", error.detail)
    path = None if unnamed_stdin else error.file
    return Located(finding, "", "", "", error.file, 0, error.line, path)


def check(args: argparse.Namespace) -> tuple[str, int]:
    """The report and the exit code (0 or 1; ``--exit-zero`` makes it 0)."""
    policy, inventory = load_policy(args), load_inventory(args.nodes)
    inputs = load_inputs(args)
    documents = inputs.documents
    checked = evaluate_all(documents, policy, inventory)

    def path_of(name: str) -> str | None:
        return (args.stdin_filename or None) if name == STDIN else name

    items = [
        Located(
            finding,
            c.dask.kind,
            c.dask.name,
            c.dask.namespace,
            c.document.source.display,
            c.document.index + 1,
            locate(c.document, finding.path),
            path_of(c.document.source.name),
        )
        for c in checked
        for finding in c.result.findings
    ]
    items += [_file_finding(e, args.stdin_filename) for e in [*inputs.errors, *inputs.notices]]
    counts = summary(items, len(checked), len(documents), len(inputs.parsed) + len(inputs.errors))
    labels = [
        (c.document.source.display, resource_label(c.dask.kind, c.dask.namespace, c.dask.name))
        for c in checked
    ]
    report = render(args.output, items, counts, labels)
    threshold = Severity.parse(args.fail_on)
    failed = any(i.finding.severity >= threshold for i in items) and not args.exit_zero
    return report, int(failed)
