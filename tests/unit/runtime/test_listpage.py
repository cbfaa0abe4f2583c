"""A LIST page decodes to what ``json.loads`` gives, without ``managedFields``, or fails clearly."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.admission.runtime import listpage

INVENTORIES = Path(__file__).parents[2] / "fixtures" / "inventories"

# A managedFields entry as the API server writes one for a kubelet's status update (the shape of
# https://kubernetes.io/docs/reference/using-api/server-side-apply/#managed-fields).
MANAGED = [
    {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-09-14T08:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:allocatable": {"f:nvidia.com/gpu": {}}}},
        "subresource": "status",
    }
]


# ObjectMeta (meta/v1) without managedFields, from the API reference:
# https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/
OBJECT_META = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)


def _page(items: list[Any], **meta: str) -> bytes:
    page = {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items}
    return json.dumps(page).encode()


def _without_managed_fields(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items = copy.deepcopy(items)
    for item in items:
        if isinstance(item.get("metadata"), dict):
            item["metadata"].pop("managedFields", None)
    return items


@pytest.mark.parametrize("path", sorted(INVENTORIES.glob("*.yaml")), ids=lambda p: p.stem)
def test_real_clusters_nodes_read_as_json_loads_reads_them(path: Path) -> None:
    items = [
        item
        for doc in yaml.safe_load_all(path.read_text())
        if isinstance(doc, dict)
        for item in doc.get("items") or [doc]
    ]
    for item in items:
        item.setdefault("metadata", {})["managedFields"] = MANAGED
    body = _page(items, resourceVersion="81234")
    page = listpage.decode(body)
    assert page.items == _without_managed_fields(json.loads(body)["items"])
    assert page.items  # each file holds nodes (or pods)
    assert (page.resource_version, page.continue_token) == ("81234", "")


def test_every_field_of_object_meta_is_kept_but_managed_fields() -> None:
    meta = {field: f"value of {field}" for field in OBJECT_META}
    meta |= {"generation": 3, "labels": {"a": "b"}, "ownerReferences": [{"kind": "DaskCluster"}]}
    item = {"apiVersion": "v1", "kind": "Pod", "metadata": meta | {"managedFields": MANAGED}}
    item |= {"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    page = listpage.decode(_page([item], resourceVersion="7", **{"continue": "token"}))
    assert page.items == [{**item, "metadata": meta}]
    assert page.continue_token == "token"


@pytest.mark.parametrize(
    "item",
    [
        pytest.param({"kind": "Node"}, id="no metadata"),
        pytest.param({"metadata": None, "spec": None}, id="null metadata and spec"),
        pytest.param({"metadata": {}, "status": {"big": 2**80, "x": 1.5e300}}, id="numbers"),
        pytest.param({"metadata": {"labels": {"é": "ü\u2028"}}}, id="unicode"),
    ],
)
def test_unusual_items_read_as_json_loads_reads_them(item: dict[str, Any]) -> None:
    body = _page([item])
    assert listpage.decode(body).items == json.loads(body)["items"]


def test_duplicate_keys_keep_the_last_as_json_loads_does() -> None:
    body = b'{"items": [{"metadata": {"name": "a", "name": "b"}, "spec": {"x": 1, "x": 2}}]}'
    assert listpage.decode(body).items == json.loads(body)["items"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"items": null}', id="items null"),
        pytest.param(b"{}", id="empty object"),
    ],
)
def test_a_page_without_items_has_none(body: bytes) -> None:
    assert listpage.decode(body) == listpage.Page([], "", "")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"<html>502 Bad Gateway</html>", id="html"),
        pytest.param(b'{"items": [', id="truncated"),
        pytest.param(b"[]", id="array"),
        pytest.param(b'{"items": {"a": 1}}', id="items an object"),
        pytest.param(b'{"items": ["a"]}', id="an item a string"),
        pytest.param(b'{"items": [{"metadata": "x"}]}', id="metadata a string"),
    ],
)
def test_what_is_not_a_list_page_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError, match=r"."):
        listpage.decode(body)
