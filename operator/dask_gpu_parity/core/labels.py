"""Kubernetes label selectors: one matcher for node affinity terms and namespace selectors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["LabelSelector", "expression_matches"]


def expression_matches(
    labels: Mapping[str, str], key: str, operator: str, values: Sequence[str]
) -> bool:
    """Whether ``labels`` satisfy one selector requirement, as the API server evaluates it.

    ``In``/``NotIn``/``Exists``/``DoesNotExist`` as in every label selector; ``Gt``/``Lt``
    (node selector terms only) compare one integer value. An unknown operator matches nothing.
    """
    value = labels.get(key)
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes label selector (``matchLabels`` and ``matchExpressions``)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every term (an empty selector matches everything)."""
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            expression_matches(labels, key, operator, values)
            for key, operator, values in self.match_expressions
        )
