"""Required node affinity terms of a pod spec: read, merge and set them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.plain import get_in

__all__ = ["add_expressions", "expressions", "set_terms", "terms"]

_REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def terms(spec: Mapping[str, Any]) -> list[Any] | None:
    """The pod's required ``nodeSelectorTerms``, ``None`` when absent or malformed."""
    found = get_in(spec, (*_REQUIRED, "nodeSelectorTerms"))
    return found if isinstance(found, list) else None


def set_terms(spec: dict[str, Any], new_terms: list[Any]) -> bool:
    """Set the pod's required ``nodeSelectorTerms``; ``False`` when a parent is malformed."""
    node = spec
    for key in _REQUIRED:
        if node.get(key) is None:  # absent, or null (which the API drops)
            node[key] = {}
        child = node[key]
        if not isinstance(child, dict):
            return False
        node = child
    node["nodeSelectorTerms"] = new_terms
    return True


def expressions(term: Any) -> list[Any]:
    """A term's ``matchExpressions`` (a new list), empty when malformed."""
    exprs = term.get("matchExpressions") if isinstance(term, Mapping) else None
    return list(exprs) if isinstance(exprs, list) else []


def add_expressions(spec: dict[str, Any], exprs: list[dict[str, Any]]) -> bool:
    """AND ``exprs`` into every required term of the pod (one new term when it has none)."""
    new_terms = []
    for term in terms(spec) or [{}]:
        if not isinstance(term, Mapping):
            return False
        existing = expressions(term)
        new_terms.append(
            {**dict(term), "matchExpressions": existing + [e for e in exprs if e not in existing]}
        )
    return set_terms(spec, new_terms)
