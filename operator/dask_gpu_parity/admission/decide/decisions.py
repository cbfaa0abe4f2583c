"""What admission answers: a pure function of the resource, the policy and the inventory.

The webhook server (``server.py``) only gathers the inputs (indices, the request, the DaskCluster
a worker group joins) and turns a :class:`Decision` into an AdmissionReview (``reviews.py``), its
JSON Patch included. Keeping the decision here makes every mode testable without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dask_gpu_parity.admission.decide.configurations import validated_by_mutation
from dask_gpu_parity.admission.decide.draversion import second_device
from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, DeviceClasses
from dask_gpu_parity.core.engine import evaluate, opted_out
from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.gpu import gpu_requests
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.patch import Operation
from dask_gpu_parity.core.plain import get_in, truncate
from dask_gpu_parity.core.policy import Mode, Policy
from dask_gpu_parity.core.resources import view
from dask_gpu_parity.names import SKIP_ANNOTATION

__all__ = [
    "MAX_WARNING",
    "ClusterLookup",
    "Decision",
    "cluster_to_read",
    "mutate",
    "validate",
]

MAX_WARNING = 240  # the API server passes warnings on; long ones are truncated by clients


@dataclass(frozen=True)
class Decision:
    """The answer to one admission request."""

    patched: Any = None  # the new object when mutating, else None
    patch: tuple[Operation, ...] = ()  # the JSON Patch from the object to ``patched``
    warnings: tuple[str, ...] = ()
    denial: str | None = None  # a message: deny with it
    findings: tuple[Finding, ...] = field(default=())
    skipped: str | None = None  # why nothing was checked (opt-out, mode off)


@dataclass(frozen=True)
class ClusterLookup:
    """The DaskCluster a DaskWorkerGroup joins, as the API server had it at admission."""

    name: str
    found: Mapping[str, Any] | None = None  # None: no DaskCluster of that name, or no answer
    error: str | None = None  # why it could not be read (the API server did not answer, 403)


def _warning(finding: Finding, prefix: str = "") -> str:
    return truncate(f"{prefix}{finding.code} {finding.path}: {finding.message}", MAX_WARNING)


def _change(finding: Finding) -> str:
    """One short line per change: the rule (why) and where it changed (what)."""
    return f"dask-gpu-parity {finding.code} {finding.rule.title.lower()}: fixed {finding.path}"


def _skip(resource: Mapping[str, Any], policy: Policy, namespace_skip: bool) -> str | None:
    if namespace_skip:
        return f"namespace opted out ({SKIP_ANNOTATION})"
    if opted_out(resource):
        return f"resource opted out ({SKIP_ANNOTATION})"
    if policy.mode is Mode.OFF:
        return f"policy {policy.name} is off"
    return None


def cluster_to_read(
    resource: Mapping[str, Any],
    policy: Policy,
    *,
    namespace_skip: bool = False,
    classes: DeviceClasses | None = None,
) -> str | None:
    """The name of the DaskCluster that validating ``resource`` needs, or ``None``.

    Only a GPU DaskWorkerGroup needs its cluster (DGP015: a GPU group must not join a scheduler
    without GPU). CPU groups, skipped ones and every other kind cost the webhook no API call.
    """
    dask = view(resource)
    if dask is None or dask.kind != "DaskWorkerGroup" or dask.worker_path is None:
        return None
    if _skip(resource, policy, namespace_skip):
        return None
    name = get_in(resource, ("spec", "cluster"))
    if not isinstance(name, str) or not name:
        return None
    return (
        name
        if gpu_requests(get_in(resource, dask.worker_path), classes or NVIDIA_CLASSES)
        else None
    )


def mutate(
    resource: Mapping[str, Any],
    policy: Policy,
    inventory: Inventory | None,
    *,
    namespace_skip: bool = False,
    classes: DeviceClasses | None = None,
    kube: tuple[int, int] | None = None,
) -> Decision:
    """The mutating webhook's answer: the fixed object, its JSON Patch, one warning per change.

    ``audit`` mode never mutates. Where the object it lets through has a GPU on its scheduler
    and the verifier (:func:`validated_by_mutation`), the API server will not call the validating
    webhook (its ``not-verified`` match condition), so this answer includes validation's: a
    denial in ``enforce``, the remaining findings as warnings otherwise. ``kube``, the API
    server's (major, minor): before 1.35 a verifier on a DRA-backed GPU gets a warning
    (:func:`~.draversion.second_device`).
    """
    skipped = _skip(resource, policy, namespace_skip)
    if skipped:
        return Decision(skipped=skipped)
    result = evaluate(resource, policy, inventory, device_classes=classes)
    if policy.mode is Mode.AUDIT or not result.changed:
        decision = Decision(findings=result.findings)
    else:
        fixed = tuple(_change(f) for f in result.findings if f.fixable)
        decision = Decision(
            patched=result.patched,
            patch=tuple(result.patch),
            warnings=fixed,
            findings=result.findings,
        )
    admitted = decision.patched if decision.patched is not None else resource
    second = second_device(admitted, classes or NVIDIA_CLASSES, inventory, kube)
    if second is not None:
        decision = replace(decision, warnings=(*decision.warnings, second))
    if not validated_by_mutation(admitted):
        return decision  # the validating webhook is called and answers for the final object
    checked = validate(admitted, policy, inventory, classes=classes)
    if checked.denial is not None:
        return Decision(denial=checked.denial, findings=result.findings)
    return replace(decision, warnings=decision.warnings + checked.warnings)


def validate(
    resource: Mapping[str, Any],
    policy: Policy,
    inventory: Inventory | None,
    *,
    cluster: ClusterLookup | None = None,
    namespace_skip: bool = False,
    classes: DeviceClasses | None = None,
) -> Decision:
    """The validating webhook's answer for an object as mutation left it.

    ``enforce`` denies on any error finding; ``warn`` and ``audit`` turn every finding into a
    warning and allow. For a GPU DaskWorkerGroup, ``cluster`` is its DaskCluster as read by the
    adapter (:func:`cluster_to_read`): one that could not be read is denied in ``enforce`` (the
    check could not be made: fail closed, like ``failurePolicy: Fail``), one that does not exist
    yet is allowed with a warning (``kubectl apply`` may create the group first).
    """
    skipped = _skip(resource, policy, namespace_skip)
    if skipped:
        return Decision(skipped=skipped)
    found = cluster.found if cluster is not None else None
    # The API server validates the object against the CRD schema before validating admission.
    result = evaluate(
        resource, policy, inventory, cluster=found, schema=False, device_classes=classes
    )
    findings = result.findings
    if policy.mode is not Mode.AUDIT:
        # Mutation already applied the fixes; what evaluate would still change is moot here.
        findings = tuple(f for f in findings if not f.fixable or f.severity is Severity.ERROR)
    errors = [
        f"{f.code} at {f.path}: {f.message}" for f in findings if f.severity is Severity.ERROR
    ]
    unreadable = _unreadable(cluster)  # the check could not be made: an error, not a finding
    if policy.mode is Mode.ENFORCE and (errors or unreadable):
        reasons = "; ".join([*errors, unreadable] if unreadable else errors)
        return Decision(
            denial=f"dask-gpu-parity denied this resource: {reasons}", findings=findings
        )
    prefix = "dask-gpu-parity audit: " if policy.mode is Mode.AUDIT else "dask-gpu-parity: "
    warnings = [_warning(f, prefix) for f in findings]
    warnings += [
        truncate(prefix + text, MAX_WARNING) for text in (unreadable, _missing(cluster)) if text
    ]
    return Decision(warnings=tuple(warnings), findings=findings)


def _unreadable(cluster: ClusterLookup | None) -> str | None:
    if cluster is None or cluster.error is None:
        return None
    return (
        f"DaskCluster {cluster.name!r} could not be read to check that its scheduler has a GPU "
        f"(DGP015): {cluster.error}; retry, and check that the operator may get daskclusters"
    )


def _missing(cluster: ClusterLookup | None) -> str | None:
    if cluster is None or cluster.found is not None or cluster.error is not None:
        return None
    return (
        f"DaskCluster {cluster.name!r} does not exist (yet), so DGP015 (its scheduler needs a "
        "GPU for this GPU worker group) was not checked: create the DaskCluster first"
    )
