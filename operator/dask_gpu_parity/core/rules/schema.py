"""DGP010, DGP011, DGP012: the document against the Dask CRD schemas and the Pod API.

Number quantities in GPU resources are quoted in place (DGP010); fields the CRDs' Kubernetes 1.21
pod schema prunes (DGP012) and other schema errors (DGP011) are reported, and so are resource
quantities the API server rejects when the dask operator creates the Pods (DGP011): the CRDs
type them as strings and check nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from dask_gpu_parity.core import quantity, schema
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.patch import apply_in_place, pointer, split_pointer
from dask_gpu_parity.core.podfacts import Pods

__all__ = ["schema_findings"]

_QUANTITY_PATH = re.compile(
    r"/(?:containers|initContainers)/\d+/resources/(?:limits|requests)/[^/]+$"
)


def schema_findings(
    patched: Mapping[str, Any],
    kind: str,
    *,
    fix: bool,
    pods: Pods,
) -> list[Finding]:
    """Schema issues as findings; with ``fix``, number quantities are quoted in place.

    ``pods``: the document's pod facts, as written (quoting a number changes no quantity the Pod
    API rejects: only strings can be rejected).
    """
    findings: list[Finding] = []
    for issue in schema.validate(patched, kind):
        value = _at(patched, issue.path)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        in_resources = _QUANTITY_PATH.search(issue.path) is not None
        if number and in_resources and quantity.parse(value) is None:
            findings.append(_not_a_quantity(issue.path, value))
        elif fix and number and isinstance(patched, dict) and in_resources:
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
    return findings + _rejected(pods)


def _rejected(pods: Pods) -> list[Finding]:
    """DGP011 for every resource quantity string that the Pod API would reject."""
    return [
        _not_a_quantity(pointer(*pod.path, key, c.position, "resources", section, name), value)
        for pod in pods.present()
        for key, facts in (("containers", pod.containers), ("initContainers", pod.init_containers))
        for c in facts
        for section, name, value in c.bad_quantities
    ]


def _not_a_quantity(path: str, value: Any) -> Finding:
    return Finding.of(
        "DGP011",
        path,
        f"{quantity.describe(value)}: the API server rejects it when the dask operator "
        "creates the Pod; fix the manifest",
    )


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
