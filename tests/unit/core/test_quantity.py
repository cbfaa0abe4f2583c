"""The one quantity parser: what k8s.io/apimachinery's ParseQuantity accepts, within int64."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from dask_gpu_parity.core.quantity import describe, parse


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("4Gi", Decimal(4 * 2**30)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1E", Decimal(10**18)),  # E alone is exa
        ("+1", Decimal(1)),
        ("-1", Decimal(-1)),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("0.0000000001", Decimal("1e-9")),  # rounded up to 1n, as the API server does
        ("9223372036854775807", Decimal(2**63 - 1)),
        (2, Decimal(2)),
        (0.5, Decimal("0.5")),
        # Refused: what the API server refuses, and what no Pod can request.
        ("1e999999999", None),
        ("9223372036854775808", None),
        ("8Ei", None),
        ("1e-99999999999", None),
        ("nan", None),
        (".nan", None),
        ("Infinity", None),
        (" 1", None),
        ("1 ", None),
        ("1.5.3", None),
        ("1e", None),
        ("1Ki5", None),
        ("", None),
        ("1" * 200, None),
        (float("nan"), None),
        (float("inf"), None),
        (2**64, None),
        (True, None),
        (None, None),
        ([1], None),
    ],
)
def test_parse(value: Any, expected: Decimal | None) -> None:
    assert parse(value) == expected
    if expected is not None:
        assert parse(value).is_finite()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (float("inf"), "not a finite number"),
        ("1e999999999", "beyond the largest quantity"),
        (2**64, "beyond the largest quantity"),
        ("four", "not a Kubernetes quantity"),
    ],
)
def test_describe(value: Any, text: str) -> None:
    assert text in describe(value)
