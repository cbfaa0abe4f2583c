"""Verdicts as ``wgpolicyk8s.io`` PolicyReports: one report per Dask resource, a result per finding.

The layout Kyverno writes since 1.10: a namespaced report per resource, its ``scope`` naming the
resource and owned by it (the garbage collector removes the report with the resource), its
results without per-result resources. ``kubectl get policyreports`` then prints the resource's
kind and name beside the pass/fail/warn counts (the CRD's printer columns), and Policy Reporter
reads ours as it reads Kyverno's and Trivy's.

Pure: verdicts in, the report as a mapping out. The operator's drift watch writes them
(``admission/runtime/reports.py``); ``audit --format policyreport`` prints them.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dask_gpu_parity.names import DISTRIBUTION, PREFIX

from .findings import RULES, Finding, Severity

__all__ = [
    "API_VERSION",
    "DIGEST_ANNOTATION",
    "KIND",
    "MANAGED_BY",
    "PLURAL",
    "POLICY",
    "Outcome",
    "Subject",
    "digest",
    "outcome",
    "passed",
    "policy_report",
    "report_name",
    "skipped",
]

GROUP, VERSION = "wgpolicyk8s.io", "v1alpha2"
API_VERSION, KIND, PLURAL = f"{GROUP}/{VERSION}", "PolicyReport", "policyreports"
POLICY = DISTRIBUTION  # every result's policy and source, as Kyverno's name their policy
MANAGED_BY = {"app.kubernetes.io/managed-by": DISTRIBUTION}
DIGEST_ANNOTATION = f"{PREFIX}/results"  # what the results say, so an unchanged report is not sent
_RESULT = {Severity.ERROR: "fail", Severity.WARNING: "warn", Severity.INFO: "pass"}
_SEVERITY = {Severity.ERROR: "high", Severity.WARNING: "medium", Severity.INFO: "info"}
_SUMMARY = ("pass", "fail", "warn", "error", "skip")


@dataclass(frozen=True, slots=True)
class Subject:
    """The Dask resource a report is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""  # without one (audit from files), the report is named after kind and name

    def ref(self) -> dict[str, str]:
        """The ``scope``: an ObjectReference."""
        ref = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        return {**ref, "uid": self.uid} if self.uid else ref


@dataclass(frozen=True, slots=True)
class Outcome:
    """One result of a report, without its time: rule, result, message and what classifies it."""

    rule: str  # a finding's code, a runtime verdict's Event reason, or "parity"
    result: str  # pass, fail, warn, error or skip
    message: str
    category: str = ""
    severity: str = ""  # critical, high, medium, low or info
    properties: tuple[tuple[str, str], ...] = ()


def outcome(finding: Finding, properties: tuple[tuple[str, str], ...] = ()) -> Outcome:
    """A finding as a result: an error fails, a warning warns, an info note passes."""
    return Outcome(
        rule=finding.code,
        result=_RESULT[finding.severity],
        message=f"{finding.path or '/'}: {finding.message}",
        category=RULES[finding.code].name,
        severity=_SEVERITY[finding.severity],
        properties=properties,
    )


def passed(message: str, properties: tuple[tuple[str, str], ...] = ()) -> Outcome:
    """The one result of a resource with nothing to report."""
    return Outcome("parity", "pass", message, "parity", properties=properties)


def skipped(message: str, properties: tuple[tuple[str, str], ...] = ()) -> Outcome:
    """The one result of a resource the policy leaves alone (its workers ask for no GPU)."""
    return Outcome("parity", "skip", message, "parity", properties=properties)


def report_name(subject: Subject) -> str:
    """``dask-gpu-parity-<uid>``; without a uid, ``dask-gpu-parity-<kind>-<name>``."""
    if subject.uid:
        return f"{POLICY}-{subject.uid}"
    return f"{POLICY}-{subject.kind.lower()}-{subject.name}"[:253]


def digest(outcomes: Sequence[Outcome]) -> str:
    """A short hash of what the results say (not when): equal for an unchanged verdict."""
    text = json.dumps([asdict(o) for o in outcomes], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def policy_report(subject: Subject, outcomes: Sequence[Outcome], seconds: int) -> dict[str, Any]:
    """The PolicyReport for ``subject``, its results stamped ``seconds`` (Unix time)."""
    results = []
    for o in outcomes:
        result: dict[str, Any] = {
            "source": POLICY,
            "policy": POLICY,
            "rule": o.rule,
            "result": o.result,
            "message": o.message,
            "timestamp": {"seconds": seconds, "nanos": 0},
        }
        if o.category:
            result["category"] = o.category
        if o.severity:
            result["severity"] = o.severity
        if o.properties:
            result["properties"] = dict(o.properties)
        results.append(result)
    tally = Counter(o.result for o in outcomes)
    metadata: dict[str, Any] = {
        "name": report_name(subject),
        "namespace": subject.namespace,
        "labels": dict(MANAGED_BY),
        "annotations": {DIGEST_ANNOTATION: digest(outcomes)},
    }
    if subject.uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": subject.api_version,
                "kind": subject.kind,
                "name": subject.name,
                "uid": subject.uid,
            }
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "scope": subject.ref(),
        "summary": {k: tally[k] for k in _SUMMARY},
        "results": results,
    }
