"""DGP010, DGP011, DGP012: the document against the Dask CRD schemas.

Number quantities in GPU resources are quoted in place (DGP010); fields the CRDs' Kubernetes 1.21
pod schema prunes (DGP012) and other schema errors (DGP011) are reported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from dask_gpu_parity.core import schema
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.patch import apply_in_place, split_pointer

__all__ = ["schema_findings"]

_QUANTITY_PATH = re.compile(
    r"/(?:containers|initContainers)/\d+/resources/(?:limits|requests)/[^/]+$"
)


def schema_findings(patched: Mapping[str, Any], kind: str, *, fix: bool) -> list[Finding]:
    """Schema issues as findings; with ``fix``, number quantities are quoted in place."""
    findings: list[Finding] = []
    for issue in schema.validate(patched, kind):
        value = _at(patched, issue.path)
        quantity = isinstance(value, int | float) and not isinstance(value, bool)
        if fix and quantity and isinstance(patched, dict) and _QUANTITY_PATH.search(issue.path):
            # _at found the value, so its parent exists: a plain replace applies.
            apply_in_place(
                patched, [{"op": "replace", "path": issue.path, "value": _quantity_string(value)}]
            )
            findings.append(
                Finding.of(
                    "DGP010",
                    issue.path,
                    f"Quantity {value!r} is a number; the Dask CRDs type quantities as strings "
                    f'and the API server rejects it: write "{_quantity_string(value)}"',
                )
            )
        elif issue.pruned:
            findings.append(
                Finding.of(
                    "DGP012",
                    issue.path,
                    f"{issue.message}: the Dask CRDs embed a Kubernetes 1.21 pod schema "
                    "without this field, so it is lost silently; remove it or move it",
                )
            )
        else:
            findings.append(Finding.of("DGP011", issue.path, f"{issue.message}: fix the manifest"))
    return findings


def _quantity_string(value: float) -> str:
    return format(Decimal(str(value)).normalize(), "f")


def _at(document: Any, ptr: str) -> Any:
    node = document
    for segment in split_pointer(ptr):
        if isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        elif isinstance(node, Mapping) and segment in node:
            node = node[segment]
        else:
            return None
    return node
