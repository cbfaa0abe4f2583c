"""Documents of a source: multi-document YAML and JSON, ``kind: List`` items, no YAML bombs.

Reading uses PyYAML's libyaml loader when present (fast, and it gives each document's line),
behind the YAML 1.1 gate (``yaml11``) that takes the faster reader where both agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from dask_gpu_parity.core.plain import MAX_DEPTH, deeper_than

from . import yaml11
from .sources import INVALID, FileError, Source

__all__ = ["MAX_EXPANDED_NODES", "Document", "Loader", "Scope", "parse"]

Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_EXPANDED_NODES = 1_000_000
# A walk's scope (``locate``): the text offsets a mapping or sequence spans. The first may be
# mid-line (a list item's first key follows its dash); the others start at line starts.
Scope = tuple[int, int]


@dataclass
class Document:
    """One object of a source: a YAML document, or an item of a ``kind: List`` document."""

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

    Documents that are no object (empty, a list, a scalar) are left out: no Kubernetes object.

    Raises:
        FileError: invalid YAML or a YAML bomb (DGP901).
    """
    pieces = yaml11.split(source.text)
    if pieces is None:
        return _parse_exact(source, source.text, 0)
    documents: list[Document] = []
    for index, piece in enumerate(pieces):
        fast, data = yaml11.load(piece)
        if fast:
            documents.extend(_objects(source, index, piece.first, piece.end, data))
        else:  # padded, so PyYAML's marks are the source's line numbers
            documents.extend(_parse_exact(source, "\n" * piece.line + piece.text, index))
    return documents


def _parse_exact(source: Source, text: str, first_index: int) -> list[Document]:
    """The objects of ``text`` (all or part of the source) read by PyYAML."""
    documents: list[Document] = []
    loader = Loader(text)
    anchors = "&" in text  # no anchor, no alias: skip the bomb check
    try:
        index = first_index
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1 if node is not None else 0
            if node is not None:
                if anchors:
                    _refuse_bombs(node, source, line)
                data = loader.construct_document(node)
                mark = node.end_mark  # at column 0 it is the next document's first line
                end = mark.line + (1 if mark.column else 0)
                documents.extend(_objects(source, index, line, end, data))
            index += 1
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        message = f"invalid YAML: {exc.problem or exc.context}{_helm_hint(source)}"
        raise FileError(source.display, message, code=INVALID, line=line, column=column) from exc
    except yaml.YAMLError as exc:
        message = f"invalid YAML: {exc}{_helm_hint(source)}"
        raise FileError(source.display, message, code=INVALID) from exc
    except RecursionError as exc:
        raise FileError(source.display, "YAML nested too deeply", code=INVALID) from exc
    finally:
        loader.dispose()
    return documents


def _helm_hint(source: Source) -> str:
    if "{{" not in source.text:
        return ""
    return (
        "; it looks like a Helm template: check the rendered chart "
        "(helm template CHART | dask-gpu-parity check -) or exclude it"
    )


_MAX_LIST_DEPTH = 32  # a List in a List ... deeper than this is read as one object


def _objects(
    source: Source, index: int, line: int, end: int, data: Any, *, prefix: str = ""
) -> Iterator[Document]:
    """The objects of one document: itself, or the items of a ``kind: List``, nested too."""
    if not prefix and deeper_than(data):
        raise FileError(
            source.display,
            f"document {index + 1} nests deeper than {MAX_DEPTH} levels, which no Kubernetes "
            "object does: refusing to read it",
            code=INVALID,
            line=line,
        )
    if not isinstance(data, dict):
        # Empty, a list or a scalar: no Kubernetes object (a kustomize JSON patch, a
        # pre-commit hooks file, a report), skipped like every other document without Dask.
        return
    items = data.get("items")
    nested = prefix.count("/items/")
    if data.get("kind") == "List" and isinstance(items, list) and nested < _MAX_LIST_DEPTH:
        for i, item in enumerate(items):
            yield from _objects(source, index, line, end, item, prefix=f"{prefix}/items/{i}")
        return
    yield Document(source, index, line, data, end, prefix)


def _refuse_bombs(root: Any, source: Source, line: int) -> None:
    """Refuse recursive documents and aliases that expand to more than MAX_EXPANDED_NODES nodes.

    An iterative walk of PyYAML's node graph: a node met again while it is still being walked
    contains itself (``&a [*a]``), which no JSON object, so no Kubernetes object, can.
    """
    sizes: dict[int, int] = {}  # finished nodes: their expanded size
    walking: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            walking.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        if key in walking:
            raise FileError(
                source.display,
                "a YAML alias refers to a node that contains it: Kubernetes objects cannot be "
                "recursive",
                code=INVALID,
                line=line,
            )
        walking.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    if sizes[id(root)] > MAX_EXPANDED_NODES:
        raise FileError(
            source.display,
            f"YAML aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (a YAML bomb?): "
            "refusing to read it",
            code=INVALID,
            line=line,
        )


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
