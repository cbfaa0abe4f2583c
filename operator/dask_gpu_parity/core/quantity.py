"""Kubernetes resource quantities, parsed as the API server parses them, within its limits.

The one parser every rule computes with. It accepts what ``resource.ParseQuantity`` accepts
(``k8s.io/apimachinery``: a decimal number, then one suffix: ``n u m k M G T P E``, ``Ki`` to
``Ei``, or an exponent ``e3``/``E-3``), and JSON numbers, and returns ``None`` for anything else:
words, whitespace, NaN and infinities, and values beyond a signed 64-bit integer, which no Pod
can request. Nothing here raises, and no result is non-finite.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

__all__ = ["MAX", "describe", "parse"]

MAX = Decimal(2**63 - 1)  # the largest quantity the API server can hold (int64 units)
_NANO = Decimal("1e-9")  # the smallest: the API server rounds smaller non-zero values up to it
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(|[numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]+)"
)
_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_EXPONENT = 2**31  # the API server reads an exponent suffix as an int32


def parse(value: Any) -> Decimal | None:
    """A quantity as a finite number, ``None`` when the API server would not accept it."""
    if value.__class__ is str:  # the common case: a few strings, again and again
        return _parse_text(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value) if abs(value) <= MAX else None
    if isinstance(value, float):
        return Decimal(repr(value)) if math.isfinite(value) and abs(value) <= MAX else None
    if not isinstance(value, str):
        return None
    return _parse_text(str(value))


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal | None:
    """A quantity string parsed; cached: ``Decimal`` is immutable, and manifests repeat them."""
    if len(value) > 128:
        return None
    match = _QUANTITY.fullmatch(value)
    if match is None:
        return None
    number, suffix = Decimal(match.group(1)), match.group(2)
    if not number:
        return Decimal(0)
    if suffix in _BINARY:
        if number.adjusted() > 19:  # beyond int64 before the factor: no overflow to compute
            return None
        result = number * 2 ** _BINARY[suffix]
    else:
        exponent = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
        if not -_EXPONENT <= exponent < _EXPONENT or number.adjusted() + exponent > 19:
            return None
        if number.adjusted() + exponent < -9:  # rounded up to the smallest, as the API server does
            return _NANO.copy_sign(number)
        result = number.scaleb(exponent)
    return result if abs(result) <= MAX else None


def describe(value: Any) -> str:
    """Why ``value`` is not a quantity, for a finding's message."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value!r} is beyond the largest quantity (2^63-1)"
    if isinstance(value, str) and _QUANTITY.fullmatch(value):
        return f"{value!r} is beyond the largest quantity (2^63-1)"
    return f'{value!r} is not a Kubernetes quantity (e.g. "1", "500m", "4Gi")'
