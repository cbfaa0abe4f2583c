"""The JSON kubectl sends for a value go-yaml built, as the API server reads it back.

A value read from YAML becomes what kubectl sends (``sigs.k8s.io/yaml`` then the
unstructured JSON decoder): keys become strings (``1`` -> ``"1"``, ``true`` -> ``"true"``, a
float as Go's ``FormatFloat(k, 'g', -1, 32)``; ``null`` and over-int64 keys are refused, as are
two keys that become one string); numbers are what the API server reads back from kubectl's JSON:
an integral float below 1e21 that fits int64 is an int (``1.0``, ``1e3``), an integer over int64
a float; NaN and infinities are refused (Go's JSON encoder refuses them).
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

from dask_gpu_parity.core.plain import MAX_DEPTH

from .kubescalar import INT64, Limit, Refused

__all__ = ["NonStringKey", "TooDeep", "wire"]


class TooDeep(Limit):
    """Nesting deeper than any Kubernetes object: our limit, not kubectl's."""

    def __init__(self) -> None:
        super().__init__(
            f"nests deeper than {MAX_DEPTH} levels, which no Kubernetes object does: "
            "refusing to read it"
        )


class NonStringKey(Exception):
    """A key that is no string, met where only string keys are expected (the fast path)."""


def wire(value: Any, *, string_keys: bool = False) -> Any:
    """The value as kubectl sends it and the API server reads it (see the module's docstring).

    Mappings with string keys and lists are changed in place (their numbers); a mapping with
    other keys is replaced by a new one.

    Args:
        value: as built from YAML or JSON (non-string keys as ``(type name, value)``).
        string_keys: raise NonStringKey at a key that is no string (a loader that is not
            :mod:`.kubeyaml` merges ``True`` and ``1``, ``1`` and ``1.0``).

    Raises:
        Refused: a key or a number that kubectl cannot convert to JSON.
        TooDeep: more than MAX_DEPTH levels.
    """
    return _wire(value, 0, string_keys)


def _wire(value: Any, depth: int, string_keys: bool) -> Any:
    kind = type(value)
    if kind is dict:
        if depth >= MAX_DEPTH:
            raise TooDeep
        if all(type(key) is str for key in value):  # the usual case: values changed in place
            for key, item in value.items():
                of = type(item)
                if of in _PLAIN or (of is int and item in INT64):
                    continue  # sent as it is
                sent = _wire(item, depth + 1, string_keys)
                if sent is not item:
                    value[key] = sent
            return value
        if string_keys:
            raise NonStringKey
        out: dict[str, Any] = {}
        for key, item in value.items():
            text = key if type(key) is str else _key_text(*key)
            if text in out:
                raise Refused(
                    f"two keys become the key {text!r} in JSON, and kubectl keeps either one"
                )
            out[text] = _wire(item, depth + 1, string_keys)
        return out
    if kind is list:
        if depth >= MAX_DEPTH:
            raise TooDeep
        for index, item in enumerate(value):
            of = type(item)
            if of not in _PLAIN and not (of is int and item in INT64):
                sent = _wire(item, depth + 1, string_keys)
                if sent is not item:
                    value[index] = sent
        return value
    if kind is float:
        return _number(value)
    if kind is int and value not in INT64:
        return float(value)  # go-yaml's uint64: a float64 once JSON is read back
    return value


_PLAIN = frozenset((str, bool, type(None)))  # sent as they are


def _number(value: float) -> int | float:
    if math.isnan(value) or math.isinf(value):
        shown = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        raise Refused(f"json: unsupported value: {shown}")
    if value.is_integer() and abs(value) < 1e21:  # Go writes it as an integer
        number = int(value) if abs(value) < 2**53 else int(Decimal(repr(value)))
        if number in INT64:
            return number
    return value


def _key_text(kind: str, key: Any) -> str:
    """A non-string key as sigs.k8s.io/yaml writes it."""
    if kind == "bool":
        return "true" if key else "false"
    if kind == "int":
        if key not in INT64:
            raise Refused(f"unsupported map key of type: uint64, key: {key}")
        return str(key)
    if kind == "float":
        return _float32_g(key)
    raise Refused("unsupported map key of type: <nil> (a null or empty key)")


def _float32_g(value: float) -> str:
    """Go's ``strconv.FormatFloat(value, 'g', -1, 32)``, with go-yaml's .inf and .nan."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for precision in range(1, 10):  # the shortest digits that read back as the same float32
        text = f"{single:.{precision - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    digits = mantissa.replace(".", "").lstrip("-")
    sign = "-" if single < 0 else ""
    point = int(exponent) + 1  # digits before the decimal point
    if point - 1 < -4 or point - 1 >= 6:
        rest = "." + digits[1:] if len(digits) > 1 else ""
        power = int(exponent)
        return f"{sign}{digits[0]}{rest}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"
