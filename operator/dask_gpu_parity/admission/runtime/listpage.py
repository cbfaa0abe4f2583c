"""One page of a LIST, decoded without what the operator never reads.

A page of 500 Nodes is about 2.8 MB of JSON, and close to half of it is ``managedFields``
(server-side apply's record of who set which field; DaskClusters 36 %, Deployments 47 %). The
informers read none of it, and decoding it into dicts and strings was most of the first drift
pass's decoding. :func:`decode` skips it while parsing (msgspec, with typed structs): each item
keeps ``apiVersion``, ``kind``, ``spec``, ``status`` and every field of ``metadata`` but
``managedFields``, as plain dicts, lists and scalars equal to what ``json.loads`` gives for
them (``tests/unit/runtime/test_listpage.py``). Other top-level fields of an item (a
ConfigMap's ``data``) are dropped too: the informed resources have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["Page", "decode"]


class _Meta(msgspec.Struct):
    """ObjectMeta (meta/v1) without managedFields.

    https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/
    """

    name: Any = UNSET
    generateName: Any = UNSET  # the API's field names, as they are in JSON
    namespace: Any = UNSET
    selfLink: Any = UNSET
    uid: Any = UNSET
    resourceVersion: Any = UNSET
    generation: Any = UNSET
    creationTimestamp: Any = UNSET
    deletionTimestamp: Any = UNSET
    deletionGracePeriodSeconds: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    ownerReferences: Any = UNSET
    finalizers: Any = UNSET


class _Item(msgspec.Struct):
    apiVersion: Any = UNSET
    kind: Any = UNSET
    metadata: _Meta | UnsetType | None = UNSET
    spec: Any = UNSET
    status: Any = UNSET


class _ListMeta(msgspec.Struct, rename={"continue_": "continue"}):
    resourceVersion: Any = ""
    continue_: Any = ""


class _Page(msgspec.Struct):
    items: list[_Item] | None = None
    metadata: _ListMeta | None = None


_DECODER = msgspec.json.Decoder(_Page)
_META: tuple[str, ...] = _Meta.__struct_fields__
_ITEM = tuple(field for field in _Item.__struct_fields__ if field != "metadata")


@dataclass(frozen=True)
class Page:
    """A LIST page: its objects, and the list's ``resourceVersion`` and ``continue`` token."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str


def decode(body: bytes) -> Page:
    """The page in ``body``.

    Raises:
        ValueError: not JSON, or not a list's shape (``items`` not a list of objects).
    """
    try:
        page = _DECODER.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError is one
        raise ValueError(str(exc)) from exc
    meta = page.metadata or _ListMeta()
    return Page(
        [_plain(item) for item in page.items or ()],
        str(meta.resourceVersion or ""),
        str(meta.continue_ or ""),
    )


def _plain(item: _Item) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in _ITEM:
        value = getattr(item, field)
        if value is not UNSET:
            out[field] = value
    meta = item.metadata
    if isinstance(meta, _Meta):
        out["metadata"] = {f: v for f in _META if (v := getattr(meta, f)) is not UNSET}
    elif meta is None:
        out["metadata"] = None
    return out
