"""Documents of a source, read as kubectl reads them: YAML and JSON streams, lists, no bombs.

kubectl (``k8s.io/cli-runtime`` ``StreamVisitor``, ``YAMLOrJSONDecoder``) reads a file whose
first non-blank character is ``{`` as a stream of JSON values, anything else as YAML cut into
pieces at ``---`` lines (:mod:`.yaml11`), each piece's first document decoded as go-yaml v2 and
``sigs.k8s.io/yaml`` decode it (:mod:`.kubeyaml`). An object with an ``items`` list (or
``items: null``) is a list: kubectl applies its items, not it (``meta.IsListType`` on the
unstructured object; the items of a typed list such as ``DaskClusterList`` without a kind and
apiVersion get the list's). A document kubectl refuses is refused here, in one line.

Documents that are no object (empty, a list, a scalar), which kubectl refuses, are left out:
``check`` reads folders where other YAML lives.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import yaml11
from .kubejson import NonStringKey, TooDeep, wire
from .kubescalar import INT64, Refused
from .sources import INVALID, FileError, Source

__all__ = ["Document", "Scope", "parse"]

# A walk's scope (``locate``): the text offsets a mapping or sequence spans. The first may be
# mid-line (a list item's first key follows its dash); the others start at line starts.
Scope = tuple[int, int]


@dataclass
class Document:
    """One object of a source: a YAML document, or an item of a list document."""

    source: Source
    index: int  # document number in the source, from 0
    line: int  # first line of the document, from 1
    data: Any
    end: int = 0  # last line (from 1) of the document
    prefix: str = ""  # JSON Pointer of the object inside the document (List items)
    # locate(): JSON Pointer -> (line, scope), shared by the findings of one document
    located: dict[str, tuple[int, Scope | None]] = field(
        default_factory=dict, repr=False, compare=False
    )


def parse(source: Source) -> list[Document]:
    """The objects of a source, in order.

    Raises:
        FileError: invalid YAML or JSON, a document kubectl refuses, a YAML bomb (DGP901).
    """
    if source.text.lstrip(_GO_SPACE).startswith("{"):
        return _parse_json(source)
    return _parse_yaml(source, source.text, 0)


def _parse_yaml(source: Source, text: str, first_index: int) -> list[Document]:
    """The objects of ``text``: the source's text, or its end padded to keep its line numbers."""
    try:
        pieces = yaml11.split(text)
    except yaml11.Separator as exc:
        raise FileError(source.display, str(exc), code=INVALID, line=exc.line) from exc
    documents: list[Document] = []
    for piece in pieces:
        if not piece.content:
            continue
        index = first_index + piece.index
        fast, data = yaml11.load(piece)
        if fast:
            try:
                sent = wire(data, string_keys=True)
                documents.extend(_objects(source, index, piece.first, piece.end, sent))
            except NonStringKey:
                fast = False  # yaml-rs merged keys such as True and 1: the exact path
            except Refused as exc:
                raise _refusal(source, index, piece.first, exc) from exc
        if not fast:  # padded, so the parser's marks are the source's line numbers
            _parse_exact(documents, source, "\n" * piece.line + piece.text, index)
    return documents


def _parse_exact(documents: list[Document], source: Source, text: str, index: int) -> None:
    """The object(s) of one piece of the source, read by the exact reader.

    PyYAML (libyaml's parser, under :mod:`.kubeyaml`) is imported on the first such piece: a
    file that takes the fast path throughout never loads it.
    """
    import yaml  # noqa: PLC0415 - deferred on purpose (start-up of `check`)

    from . import kubeyaml  # noqa: PLC0415 - deferred on purpose (start-up of `check`)

    line = len(text) - len(text.lstrip("\n")) + 1  # the piece's start
    try:
        read = kubeyaml.load(text)
        if read is not None:
            data, line, end = read
            _add(documents, source, index, data, line=line, end=end)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        message = f"invalid YAML: {exc.problem or exc.context}{_helm_hint(source)}"
        raise FileError(source.display, message, code=INVALID, line=at, column=column) from exc
    except yaml.YAMLError as exc:
        message = f"invalid YAML: {exc}{_helm_hint(source)}"
        raise FileError(source.display, message, code=INVALID) from exc
    except Refused as exc:
        raise _refusal(source, index, line, exc) from exc
    except RecursionError as exc:
        raise FileError(source.display, "YAML nested too deeply", code=INVALID) from exc


def _refusal(source: Source, index: int, line: int, exc: Refused) -> FileError:
    message = f"document {index + 1}: {exc}: kubectl refuses it too{_helm_hint(source)}"
    if not exc.kubectl_refuses:
        message = f"document {index + 1}{'' if isinstance(exc, TooDeep) else ':'} {exc}"
    return FileError(source.display, message, code=INVALID, line=exc.line or line)


def _add(
    documents: list[Document], source: Source, index: int, data: Any, *, line: int, end: int
) -> None:
    """Add the objects of one document (as built, before :func:`wire`)."""
    try:
        documents.extend(_objects(source, index, line, end, wire(data)))
    except Refused as exc:
        raise _refusal(source, index, line, exc) from exc


def _helm_hint(source: Source) -> str:
    if "{{" not in source.text:
        return ""
    return (
        "; it looks like a Helm template: check the rendered chart "
        "(helm template CHART | dask-gpu-parity check -) or exclude it"
    )


def _objects(source: Source, index: int, line: int, end: int, data: Any) -> Iterator[Document]:
    """The objects of one document: itself, or the items of a list (kubectl's FlattenListVisitor).

    Raises:
        Refused: ``items`` is neither a list nor null, or an item is no object or a list itself.
    """
    if not isinstance(data, dict):
        # Empty, a list or a scalar: no Kubernetes object (a kustomize JSON patch, a
        # pre-commit hooks file, a report), skipped like every other document without Dask.
        return
    if "items" not in data or not isinstance(data.get("kind"), str) or not data["kind"]:
        yield Document(source, index, line, data, end)
        return
    items = data["items"]
    if items is None:
        return  # an empty list
    if not isinstance(items, list):
        raise Refused("items must be a list: kubectl reads an object with items as a list")
    kind, version = data["kind"], data.get("apiVersion")
    for i, item in enumerate(items):
        if item is not None and not isinstance(item, dict):
            raise Refused(f"items/{i} is no object")
        obj = item or {}
        if not _text(obj.get("kind")) and not _text(obj.get("apiVersion")):
            obj = {**obj, "kind": kind.removesuffix("List"), "apiVersion": _text(version)}
        if isinstance(obj.get("items"), list):
            raise Refused(f"items/{i} is a list itself, which kubectl cannot apply")
        yield Document(source, index, line, obj, end, f"/items/{i}")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# JSON: Go's encoding/json stream, then the unstructured decoder's numbers. A number beyond
# float64 (1e400) decodes as infinity here, which wire() refuses, as the unstructured decoder
# refuses it: after the stream decoder has taken the value, so a syntax error later in the same
# value still sends kubectl to its YAML fallback.
_GO_SPACE = "\t\n\v\f\r \x85\xa0"  # bytes.TrimLeftFunc(unicode.IsSpace) before the "{"
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _json_int(text: str) -> int | float:
    if len(text) > 20:  # more characters than any int64
        return float(text)
    number = int(text)
    return number if number in INT64 else float(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON")


_DECODER = json.JSONDecoder(parse_int=_json_int, parse_float=float, parse_constant=_no_constant)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _parse_json(source: Source) -> list[Document]:
    """The objects of a JSON stream.

    What follows a first or second value that is no JSON is read as YAML (kubectl's fallback).
    """
    text = source.text
    starts = source.line_starts
    documents: list[Document] = []
    position, count = 0, 0
    while True:
        position = _JSON_SPACE.match(text, position).end()  # type: ignore[union-attr]
        if position >= len(text):
            return documents
        line = bisect.bisect_right(starts, position)
        try:
            data, stop = _DECODER.raw_decode(text, position)
        except RecursionError as exc:
            raise FileError(source.display, "JSON nested too deeply", code=INVALID) from exc
        except ValueError as exc:
            if count > 1:
                message = f"invalid JSON: {exc}"
                raise FileError(source.display, message, code=INVALID, line=line) from exc
            return documents + _parse_yaml(source, _yaml_rest(source, position), count)
        if "\\u" in text[position:stop] and _SURROGATE.search(
            dumped := json.dumps(data, ensure_ascii=False)
        ):
            data = json.loads(_SURROGATE.sub("\ufffd", dumped))  # Go decodes them as U+FFFD
        end = bisect.bisect_right(starts, stop - 1)
        _add(documents, source, count, data, line=line, end=end)
        position, count = stop, count + 1


def _yaml_rest(source: Source, position: int) -> str:
    """The text kubectl reads as YAML from ``position``, padded to keep the line numbers."""
    text = source.text
    stop = position
    while stop < len(text) and text[stop] in _GO_SPACE:  # Go's consumeWhitespace
        stop += 1
        if text[stop - 1] == "\n":
            break
    return "\n" * (bisect.bisect_right(source.line_starts, stop) - 1) + text[stop:]
