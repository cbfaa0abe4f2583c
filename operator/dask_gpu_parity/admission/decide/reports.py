"""What a GPU DaskCluster's PolicyReport says: its spec's findings and where its pods run.

Pure: the drift watch's last verdicts of one cluster in, the report's results out
(``core/policyreport.py`` makes the report; ``runtime/reports.py`` writes it).
"""

from __future__ import annotations

from collections.abc import Sequence

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.policyreport import Outcome, outcome, passed

from .placement import Mismatch

__all__ = ["PARITY", "outcomes"]

PARITY = "The scheduler has GPU parity with its workers"
MISMATCH_RULE = "ParityDriverMismatch"  # the Event's reason: one name for one verdict


def outcomes(
    findings: Sequence[Finding], mismatch: Mismatch | None, *, repairing: bool = False
) -> tuple[Outcome, ...]:
    """One result per finding and one for a driver mismatch; a single pass when there is none.

    Args:
        findings: the findings of the cluster's last spec check (its scheduler Deployment's).
        mismatch: the scheduler pod on another driver class than its workers, if it is.
        repairing: whether the policy repairs drift (the mismatch's message says what happens).
    """
    found = [outcome(f) for f in findings]
    if mismatch is not None:
        found.append(
            Outcome(
                rule=MISMATCH_RULE,
                result="fail",
                message=mismatch.message(repairing=repairing),
                category="placement",
                severity="high",
            )
        )
    return tuple(found) or (passed(PARITY),)
