"""``audit``'s reports: a table, JSON, SARIF 2.1.0 and wgpolicyk8s.io PolicyReports."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
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

__all__ = ["AUDIT_FORMATS", "render_audit"]

AUDIT_FORMATS = ("text", "json", "sarif", "policyreport")
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


def _text(audited: Sequence[Audited]) -> str:
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
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows
    ]
    details = [
        printable(
            f"{a.kind} {a.namespace}/{a.name}: {f.code} {f.severity} at {f.path or '/'}: "
            + f.message
        )
        for a in audited
        for f in a.findings
    ]
    verdicts = Counter(a.verdict for a in audited)
    tally = ", ".join(f"{verdicts[v]} {v}" for v in VERDICTS if verdicts[v]) or "none"
    out = [*lines] if audited else ["No Dask resources found"]
    if details:
        out += ["", "Findings:", *(f"  {d}" for d in details)]
    out += ["", f"{len(audited)} Dask resources: {tally}"]
    return "\n".join(line.rstrip() for line in out) + "\n"


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "severity": str(f.severity),
        "path": f.path,
        "message": f.message,
        "fixable": f.fixable,
    }


def _json(audited: Sequence[Audited]) -> str:
    resources = [
        {
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
        for a in audited
    ]
    verdicts = Counter(a.verdict for a in audited)
    summary = {"resources": len(audited), "verdicts": {v: verdicts[v] for v in VERDICTS}}
    return json.dumps({"resources": resources, "summary": summary}, indent=2) + "\n"


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


def render_audit(fmt: str, audited: Sequence[Audited]) -> str:
    """The report in ``fmt`` (one of :data:`AUDIT_FORMATS`)."""
    if fmt == "json":
        return _json(audited)
    if fmt == "sarif":
        return _sarif(audited)
    if fmt == "policyreport":
        return _policy_reports(audited)
    return _text(audited)
