"""YAML scalars resolved as kubectl resolves them.

kubectl reads YAML with ``sigs.k8s.io/yaml``, which decodes each document with its fork of
go-yaml v2 (``go.yaml.in/yaml/v2``, ``resolve.go``) into ``interface{}``. A plain scalar is:

- ``null`` for ``""``, ``~``, ``null``, ``Null``, ``NULL``; a bool for ``y Y yes Yes YES true
  True TRUE on On ON`` and ``n N no No NO false False FALSE off Off OFF``; ``.inf``, ``-.inf``,
  ``+.inf``, ``.nan`` (and their ``Inf``/``INF``, ``NaN``/``NAN`` spellings) are floats;
- when it starts with ``.``: a float if Go's ``strconv.ParseFloat`` takes it (``.5``, ``.5_0``);
- when it starts with a digit or a sign: with every ``_`` removed, an integer if Go's
  ``strconv.ParseInt(s, 0, 64)`` takes it (``0x1F``, ``0o17``, ``017`` octal, ``0b11``), else
  an unsigned one (``ParseUint``, up to 2**64-1), else a float if it looks like
  ``[-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?`` (``d`` a digit) and does not overflow;
- anything else, dates and times included (go-yaml keeps timestamps as their text when it
  decodes into ``interface{}``), a string.

A tagged scalar (``!!int 1``) must resolve to its tag (an integer may become a ``!!float``), else
kubectl refuses the document; ``!!str`` keeps the text; ``!!binary`` is base64; other tags
(``!foo``) keep the text.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import Any

__all__ = ["BINARY", "INT64", "MERGE", "STR", "Limit", "Refused", "plain", "tagged"]


class Refused(ValueError):
    """A document kubectl refuses to read; the message says why, ``line`` (from 1) where."""

    line = 0
    kubectl_refuses = True


class Limit(Refused):
    """A document beyond a limit of ours (kubectl may read it)."""

    kubectl_refuses = False


_TAG = "tag:yaml.org,2002:"
STR, BOOL, INT, FLOAT, NULL = (_TAG + n for n in ("str", "bool", "int", "float", "null"))
TIMESTAMP, BINARY, MERGE = (_TAG + n for n in ("timestamp", "binary", "merge"))
INT64 = range(-(2**63), 2**63)
_UINT64 = 2**64

_WORDS: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"), True),
    **dict.fromkeys(("on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE"), False),
    **dict.fromkeys(("off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_NUMERIC = frozenset("+-0123456789")
# strconv.ParseFloat of a scalar starting with "." (underscores only between digits)
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+(?:_[0-9]+)*)?")
_YAML_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}
_PREFIX = {"b": 2, "o": 8, "x": 16}


def _tag_of(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    return STR


def plain(text: str) -> Any:
    """The value of a plain (untagged, unquoted) scalar: None, bool, int, float or str.

    Integers may exceed int64 (go-yaml's uint64); floats may be infinite or NaN (from the
    words above only).
    """
    word = _WORDS.get(text, text)
    if word is not text:
        return word
    first = text[:1]
    if first == ".":
        if _DOT_FLOAT.fullmatch(text):
            value = float(text.replace("_", ""))
            if not math.isinf(value):  # ParseFloat's range error: a string
                return value
        return text
    if first not in _NUMERIC:
        return text
    digits = text.replace("_", "")
    number = _parse_int(digits)
    if number is not None:
        return number
    if _YAML_FLOAT.fullmatch(digits):
        value = float(digits)
        if not math.isinf(value):
            return value
    return text


def _parse_uint(s: str) -> int | None:
    """Go's ``strconv.ParseUint(s, 0, 64)`` for text without underscores; None when it fails."""
    if not s:
        return None
    base = 10
    if s[0] == "0":  # a prefix (0x, 0o, 0b) before at least one more character, or octal
        prefix = _PREFIX.get(s[1:2].lower()) if len(s) >= 3 else None
        base, s = (prefix, s[2:]) if prefix else (8, s[1:])
    allowed = _DIGITS[base]
    if not all(c in allowed for c in s):
        return None
    if len(s.lstrip("0")) > 64:  # more digits than 2**64 has in any base
        return None
    value = int(s, base) if s else 0
    return value if value < _UINT64 else None


def _parse_int(s: str) -> int | None:
    """go-yaml's integers: ``ParseInt(s, 0, 64)``, else ``ParseUint(s, 0, 64)``."""
    sign, body = (s[0], s[1:]) if s[:1] in ("+", "-") else ("", s)
    value = _parse_uint(body)
    if value is None:
        return None
    if sign == "-":
        return -value if value <= 2**63 else None
    if value < 2**63 or not sign:  # unsigned: ParseUint takes no sign
        return value
    return None


def tagged(tag: str, text: str) -> Any:
    """The value of a scalar with an explicit tag, or Refused as kubectl refuses it."""
    if tag == STR:
        return text
    if tag == BINARY:
        try:
            data = base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Refused("!!binary value contains invalid base64 data") from exc
        # Go's JSON encoder replaces each byte that is no UTF-8 with U+FFFD
        return re.sub("[\udc80-\udcff]", "\ufffd", data.decode("utf-8", "surrogateescape"))
    if tag not in (BOOL, INT, FLOAT, NULL, TIMESTAMP):
        return text  # an application tag (!foo, !!set ...): go-yaml keeps the text
    if tag == TIMESTAMP and is_timestamp(text):
        return text
    value = plain(text)
    found = _tag_of(value)
    if found == tag:
        return value
    if tag == FLOAT and found == INT and value in INT64:
        return float(value)
    short = found.replace(_TAG, "!!")
    raise Refused(f"cannot decode {short} `{text}` as a {tag.replace(_TAG, '!!')}")


_DATE = r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
_CLOCK = r"([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[.,][0-9]+)?"
_TIMESTAMPS = (  # go-yaml's allowedTimestampFormats as Go's time.Parse reads them
    re.compile(rf"{_DATE}[Tt]{_CLOCK}(?:Z|[-+]([0-9]{{2}}):([0-9]{{2}}))"),
    re.compile(rf"{_DATE} +{_CLOCK}()()"),
    re.compile(rf"{_DATE}()()()()()"),
)


def is_timestamp(text: str) -> bool:
    """Whether go-yaml's ``parseTimestamp`` takes the text (used for ``!!timestamp``)."""
    for pattern in _TIMESTAMPS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        year, month, day, hour, minute, second, zh, zm = (int(g or 0) for g in match.groups())
        return (
            1 <= month <= 12
            and 1 <= day <= _days(year, month)
            and hour < 24
            and minute < 60
            and second < 60
            and zh <= 24
            and zm <= 60
        )
    return False


def _days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31
