"""``audit``: a live cluster's Dask resources, their findings and their observed parity.

``client`` reads the cluster (list and get only); ``observe`` decides, without I/O.
"""

from __future__ import annotations

from .client import AuditError, Lister, read_state
from .observe import VERDICTS, Audited, ClusterState, PodSeen, audit

__all__ = [
    "VERDICTS",
    "AuditError",
    "Audited",
    "ClusterState",
    "Lister",
    "PodSeen",
    "audit",
    "read_state",
]
