"""What admission answers: a pure function of the resource, the policy and the inventory.

The kopf adapter (``admission.py``) only gathers the inputs (indices, the request) and turns a
:class:`Decision` into kopf's patch, warnings and ``AdmissionError``. Keeping the decision here
makes every mode testable without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .engine import evaluate, opted_out
from .findings import Finding, Severity
from .placement import Inventory
from .policy import Mode, Policy

__all__ = ["MAX_WARNING", "Decision", "mutate", "validate"]

MAX_WARNING = 240  # the API server passes warnings on; long ones are truncated by clients


@dataclass(frozen=True)
class Decision:
    """The answer to one admission request."""

    patched: Any = None  # the new object when mutating, else None
    warnings: tuple[str, ...] = ()
    denial: str | None = None  # a message: deny with it
    findings: tuple[Finding, ...] = field(default=())
    skipped: str | None = None  # why nothing was checked (opt-out, mode off)


def _warning(finding: Finding, prefix: str = "") -> str:
    text = f"{prefix}{finding.code} {finding.path}: {finding.message}"
    return text if len(text) <= MAX_WARNING else text[: MAX_WARNING - 1] + "…"


def _change(finding: Finding) -> str:
    """One short line per change: the rule (why) and where it changed (what)."""
    return f"dask-gpu-parity {finding.code} {finding.rule.title.lower()}: fixed {finding.path}"


def _skip(resource: Mapping[str, Any], policy: Policy, namespace_skip: bool) -> str | None:
    if namespace_skip:
        return "namespace opted out (gpuparity.dask.org/skip)"
    if opted_out(resource):
        return "resource opted out (gpuparity.dask.org/skip)"
    if policy.mode is Mode.OFF:
        return f"policy {policy.name} is off"
    return None


def mutate(
    resource: Mapping[str, Any],
    policy: Policy,
    inventory: Inventory | None,
    *,
    namespace_skip: bool = False,
) -> Decision:
    """The mutating webhook's answer: the fixed object and one warning per change.

    ``audit`` mode never mutates; validation reports instead.
    """
    skipped = _skip(resource, policy, namespace_skip)
    if skipped:
        return Decision(skipped=skipped)
    result = evaluate(resource, policy, inventory)
    if policy.mode is Mode.AUDIT or not result.changed:
        return Decision(findings=result.findings)
    fixed = tuple(_change(f) for f in result.findings if f.fixable)
    return Decision(patched=result.patched, warnings=fixed, findings=result.findings)


def validate(
    resource: Mapping[str, Any],
    policy: Policy,
    inventory: Inventory | None,
    *,
    cluster: Mapping[str, Any] | None = None,
    namespace_skip: bool = False,
) -> Decision:
    """The validating webhook's answer for an object as mutation left it.

    ``enforce`` denies on any error finding; ``warn`` and ``audit`` turn every finding into a
    warning and allow.
    """
    skipped = _skip(resource, policy, namespace_skip)
    if skipped:
        return Decision(skipped=skipped)
    # The API server validates the object against the CRD schema before validating admission.
    result = evaluate(resource, policy, inventory, cluster=cluster, schema=False)
    findings = result.findings
    if policy.mode is not Mode.AUDIT:
        # Mutation already applied the fixes; what evaluate would still change is moot here.
        findings = tuple(f for f in findings if not f.fixable or f.severity is Severity.ERROR)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if policy.mode is Mode.ENFORCE and errors:
        reasons = "; ".join(f"{f.code} at {f.path}: {f.message}" for f in errors)
        return Decision(
            denial=f"dask-gpu-parity denied this resource: {reasons}", findings=findings
        )
    prefix = "dask-gpu-parity audit: " if policy.mode is Mode.AUDIT else "dask-gpu-parity: "
    return Decision(warnings=tuple(_warning(f, prefix) for f in findings), findings=findings)
