"""``audit``: read the kubeconfig's cluster and report every Dask resource's parity now."""

from __future__ import annotations

import gc
from typing import TextIO

from dask_gpu_parity.audit import AuditError, Lister, audit, read_state
from dask_gpu_parity.manifests import InputError

from .args import AuditArgs
from .audit_report import audit_chunks

__all__ = ["run_audit"]

# Verdicts that are a finding about the cluster as it runs, whatever --fail-on says.
_FAILING = frozenset({"check-failed", "drift"})


def run_audit(args: AuditArgs, out: TextIO, err: TextIO | None = None) -> int:
    """Write the report to ``out``, as it is rendered; return the exit code.

    The exit code is 1 for findings at or above ``--fail-on`` or a drift, else 0.

    Raises:
        InputError: the cluster cannot be read (no kubeconfig, unreachable, Forbidden).
    """
    # The listed objects are acyclic dicts and lists that reference counting frees; the cyclic
    # collector would only walk them again and again as pages arrive (as for `check`).
    gc.disable()
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
    del state
    if err is not None and not audited:
        where = f"namespace {namespace}" if namespace else "any namespace"
        err.write(f"No DaskClusters, DaskJobs or DaskWorkerGroups in {where}\n")
    failed = any(
        a.verdict in _FAILING or any(f.severity >= args.fail_on for f in a.findings)
        for a in audited
        if a.verdict != "skipped"
    )
    for chunk in audit_chunks(args.output, audited):
        out.write(chunk)
    out.flush()
    return int(failed and not args.exit_zero)
