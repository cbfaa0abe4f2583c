"""``audit``'s reports: a table, JSON, SARIF 2.1.0 and wgpolicyk8s.io PolicyReports."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import yaml

from dask_gpu_parity.audit import VERDICTS, Audited
from dask_gpu_parity.core.findings import RULES, Finding, Severity
from dask_gpu_parity.core.policyreport import (
    Outcome,
    Subject,
    outcome,
    passed,
    policy_report,
    skipped,
)
from dask_gpu_parity.manifests.report import printable
from dask_gpu_parity.manifests.report.sarif import SARIF_LEVEL, sarif_driver
from dask_gpu_parity.names import DASK_API_VERSION

from .audit_parser import AUDIT_FORMATS

__all__ = ["AUDIT_FORMATS", "audit_chunks", "render_audit"]

# What was observed running, as a failing result: (rule, category).
_OBSERVED = {
    "drift": ("observed-parity", "observed"),
    "check-failed": ("GPUParityCheckFailed", "observed"),
}
_COLUMNS = (
    "NAMESPACE", "KIND", "NAME", "VERDICT", "SCHEDULER NODE", "DRIVER", "CUDA", "GPU", "CHECK",
    "WORKERS", "FINDINGS", "REASON",
)  # fmt: skip


def _scheduler(a: Audited) -> Any:
    placed = [s for s in a.schedulers if s.node]
    return next((s for s in placed if s.phase == "Running"), placed[0] if placed else None)


def _workers(a: Audited) -> str:
    running = sum(1 for w in a.workers if w.node and w.phase == "Running")
    return f"{running}/{len(a.workers)}"


def _counted(findings: Sequence[Finding]) -> str:
    counts = Counter(f.severity for f in findings)
    parts = [f"{counts[s]}{str(s)[0].upper()}" for s in Severity if counts[s]]
    return " ".join(reversed(parts)) or "-"


def _text(audited: Sequence[Audited]) -> Iterator[str]:
    """The table, the findings and the tally, a line at a time."""
    rows: list[tuple[str, ...]] = [_COLUMNS]
    for a in audited:
        s = _scheduler(a)
        rows.append(
            tuple(
                printable(v) or "-"
                for v in (
                    a.namespace, a.kind, a.name, a.verdict, s.node if s else "",
                    s.driver if s else "", s.cuda if s else "", s.product if s else "",
                    s.check if s else "", _workers(a), _counted(a.findings), a.reason,
                )
            )
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS) - 1)]
    if not audited:
        yield "No Dask resources found\n"
    else:
        for r in rows:
            cells = "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False))
            yield (cells + "  " + r[-1]).rstrip() + "\n"
    if any(a.findings for a in audited):
        yield "\nFindings:\n"
        for a in audited:
            for f in a.findings:
                where = f"{a.kind} {a.namespace}/{a.name}: {f.code} {f.severity} at {f.path or '/'}"
                yield f"  {printable(where + ': ' + f.message)}".rstrip() + "\n"
    verdicts = Counter(a.verdict for a in audited)
    tally = ", ".join(f"{verdicts[v]} {v}" for v in VERDICTS if verdicts[v]) or "none"
    yield f"\n{len(audited)} Dask resources: {tally}\n"


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "severity": str(f.severity),
        "path": f.path,
        "message": f.message,
        "fixable": f.fixable,
    }


def _json(audited: Sequence[Audited]) -> Iterator[str]:
    """One resource a line, from the C encoder (``indent`` would take the Python one)."""
    yield '{"resources": ['
    for n, a in enumerate(audited):
        resource = {
            "kind": a.kind,
            "namespace": a.namespace,
            "name": a.name,
            "policy": a.policy,
            "verdict": a.verdict,
            "reason": a.reason,
            "scheduler": [s.as_dict() for s in a.schedulers],
            "workers": [w.as_dict() for w in a.workers],
            "findings": [_finding(f) for f in a.findings],
        }
        yield ("\n" if n == 0 else ",\n") + json.dumps(resource)
    verdicts = Counter(a.verdict for a in audited)
    summary = {"resources": len(audited), "verdicts": {v: verdicts[v] for v in VERDICTS}}
    yield f'\n],\n"summary": {json.dumps(summary)}}}\n'


def _sarif(audited: Sequence[Audited]) -> str:
    codes = {code: n for n, code in enumerate(RULES)}
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": codes[f.code],
            "level": SARIF_LEVEL[f.severity],
            "message": {
                "text": printable(f"{a.kind} {a.namespace}/{a.name} {f.path}: {f.message}")
            },
            "locations": [
                {
                    "logicalLocations": [
                        {"fullyQualifiedName": f"{a.namespace}/{a.kind}/{a.name}", "kind": "object"}
                    ]
                }
            ],
            "properties": {"verdict": a.verdict, "path": f.path},
        }
        for a in audited
        for f in a.findings
    ]
    run = {
        "tool": {"driver": sarif_driver()},
        "invocations": [{"executionSuccessful": True}],
        "results": results,
    }
    log = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0"}
    return json.dumps({**log, "runs": [run]}, indent=2) + "\n"


def _outcomes(a: Audited) -> list[Outcome]:
    """The findings, then what was observed; a single pass or skip for a resource without."""
    verdict = (("verdict", a.verdict),)
    found = [outcome(f, verdict) for f in a.findings]
    if a.verdict in _OBSERVED:
        rule, category = _OBSERVED[a.verdict]
        found.append(Outcome(rule, "fail", a.reason, category, "high", verdict))
    if found:
        return found
    if a.verdict in ("no-gpu", "skipped"):
        return [skipped(a.reason, verdict)]
    return [passed(a.reason, verdict)]


def _policy_reports(audited: Sequence[Audited]) -> str:
    """One report per Dask resource, named and shaped as the operator's drift watch writes them."""
    now = int(time.time())
    reports = [
        policy_report(
            Subject(DASK_API_VERSION, a.kind, a.namespace, a.name, a.uid), _outcomes(a), now
        )
        for a in audited
    ]
    return yaml.safe_dump_all(reports, sort_keys=False, width=1_000) if reports else ""


def audit_chunks(fmt: str, audited: Sequence[Audited]) -> Iterator[str]:
    """The report in ``fmt`` (one of :data:`AUDIT_FORMATS`), a piece at a time to stream."""
    if fmt == "json":
        yield from _json(audited)
    elif fmt == "sarif":
        yield _sarif(audited)
    elif fmt == "policyreport":
        yield _policy_reports(audited)
    else:
        yield from _text(audited)


def render_audit(fmt: str, audited: Sequence[Audited]) -> str:
    """The whole report in ``fmt``, as one string."""
    return "".join(audit_chunks(fmt, audited))
