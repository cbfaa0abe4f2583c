"""``audit``: read the kubeconfig's cluster and report every Dask resource's parity now."""

from __future__ import annotations

from typing import TextIO

from dask_gpu_parity.audit import AuditError, Lister, audit, read_state
from dask_gpu_parity.manifests import InputError

from .args import AuditArgs
from .audit_report import render_audit

__all__ = ["run_audit"]

# Verdicts that are a finding about the cluster as it runs, whatever --fail-on says.
_FAILING = frozenset({"check-failed", "drift"})


def run_audit(args: AuditArgs, err: TextIO | None = None) -> tuple[str, int]:
    """The report and the exit code: 1 for findings at or above ``--fail-on`` or a drift.

    Raises:
        InputError: the cluster cannot be read (no kubeconfig, unreachable, Forbidden).
    """
    namespace = None if args.all_namespaces else args.namespace
    try:
        lister = Lister(args.kubeconfig, args.context, timeout=args.request_timeout)
        try:
            if namespace is None and not args.all_namespaces:
                namespace = lister.namespace
            state = read_state(lister, namespace)
        finally:
            lister.close()
    except AuditError as exc:
        raise InputError(str(exc)) from exc
    audited = audit(state)
    if err is not None and not audited:
        where = f"namespace {namespace}" if namespace else "any namespace"
        err.write(f"No DaskClusters, DaskJobs or DaskWorkerGroups in {where}\n")
    failed = any(
        a.verdict in _FAILING or any(f.severity >= args.fail_on for f in a.findings)
        for a in audited
        if a.verdict != "skipped"
    )
    return render_audit(args.output, audited), int(failed and not args.exit_zero)
