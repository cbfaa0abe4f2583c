"""The manifest reader against kubectl itself: the same objects, or a refusal where kubectl refuses.

Each batch writes its cases to a folder and runs ``kubectl create --dry-run=client -o json
--validate=false -f DIR`` once (kubectl asks the API server only for the REST mapping), then
reads every file with ``manifests.parse``. A case agrees when kubectl printed exactly the objects
the reader gives, with the same JSON types (an integer is no float), or when both refuse it.

Generated cases: 1,000 (about 20 s), 20,000 under ``HYPOTHESIS_PROFILE=nightly``
(``make nightly``), 1,000 per kubectl run. ``docs/architecture.md`` lists what this
test found.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dask_gpu_parity.manifests import FileError, parse, read_source

from .kubectl_cases import case, hand_picked

pytestmark = pytest.mark.e2e

NIGHTLY = os.environ.get("HYPOTHESIS_PROFILE") == "nightly"
GENERATED, PER_RUN = (20_000 if NIGHTLY else 1_000), 1_000
# Where kubectl reads a document at random and the reader refuses it: two keys that become one
# JSON key (Go's map order decides which one kubectl keeps).
EITHER = "two keys become the key"


INT64 = range(-(2**63), 2**63)


def _int_or_float(text: str) -> int | float:
    number = int(text)
    return number if number in INT64 else float(text)


def _float(text: str) -> int | float:
    number = float(text)
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _typed(value: Any) -> Any:
    """The value with its JSON types made visible (1, 1.0 and True compare unequal)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, value)


def kubectl_objects(cluster: Any, target: Path) -> tuple[dict[str, list[Any]], str, int]:
    """kubectl's objects per case file stem, its stderr and its exit code."""
    proc = subprocess.run(
        [cluster.kubectl_bin, "--kubeconfig", str(cluster.kubeconfig), "create",
         "--dry-run=client", "-o", "json", "--validate=false", "-f", str(target)],
        capture_output=True, text=True, env=cluster.env, timeout=300, check=False,
    )  # fmt: skip
    decoder = json.JSONDecoder(parse_int=_int_or_float, parse_float=_float)
    objects: dict[str, list[Any]] = {}
    unnamed: list[Any] = []  # a list item without a name: its case is the next named object's
    text, position = proc.stdout, 0
    while (position := len(text) - len(text[position:].lstrip())) < len(text):
        obj, position = decoder.raw_decode(text, position)
        name = obj.get("metadata", {}).get("name")
        if not isinstance(name, str):
            unnamed.append(_typed(obj))
            continue
        objects.setdefault(name.split("-")[0], []).extend([*unnamed, _typed(obj)])
        unnamed = []
    return objects, proc.stderr, proc.returncode


def ours(path: Path) -> list[Any] | str:
    """The reader's objects of a file, or its refusal."""
    try:
        docs = parse(read_source(str(path)))
    except FileError as exc:
        return f"refused: {exc.detail}"
    objects = []
    for doc in docs:  # kubectl sets the namespace from its context where an object has none
        obj = dict(doc.data)
        if "namespace" not in obj.get("metadata", {}):
            obj["metadata"] = {**obj.get("metadata", {}), "namespace": "default"}
        objects.append(_typed(obj))
    return objects


def disagreements(cluster: Any, files: list[tuple[str, str, str]]) -> list[str]:
    """Each case where the reader and kubectl disagree, described in one line.

    kubectl names the file in most errors, not all (``... is not a list``): a case that seems to
    disagree is run again alone, where kubectl's exit code says whether it refused.
    """
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, text, _ in files:
            (folder / name).write_bytes(text.encode())
        printed, stderr, _ = kubectl_objects(cluster, folder)
        refused = set(re.findall(r"([ch]\d{5})\.(?:yaml|json)", stderr))
        found = []
        for name, text, what in files:
            stem = name.split(".")[0]
            mine = ours(folder / name)
            theirs: Any = "refused" if stem in refused else printed.get(stem, [])
            if not _agree(mine, theirs):
                alone, error, code = kubectl_objects(cluster, folder / name)
                theirs = f"refused: {error.strip()[:300]}" if code else alone.get(stem, [])
            if not _agree(mine, theirs):
                found.append(f"{name} ({what}): {text!r}\n  ours:    {mine}\n  kubectl: {theirs}")
    return found


def _agree(mine: list[Any] | str, theirs: list[Any] | str) -> bool:
    if isinstance(mine, str):  # refused
        return isinstance(theirs, str) or EITHER in mine
    return mine == theirs


def test_hand_picked_hostile_yaml_reads_as_kubectl_reads_it(cluster: Any) -> None:
    found = disagreements(cluster, hand_picked())
    assert not found, "\n".join(found)


def _generated(count: int) -> list[tuple[str, str]]:
    """``count`` cases drawn by hypothesis (one example each, numbered as drawn)."""
    drawn: list[tuple[str, str]] = []

    @settings(
        max_examples=count,
        deadline=None,
        phases=[Phase.generate],  # nothing to shrink: the cases are judged afterwards
        suppress_health_check=list(HealthCheck),
        derandomize=not NIGHTLY,
        database=None,
    )
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        drawn.append(data.draw(case(len(drawn))))

    draw()
    return drawn


@pytest.mark.timeout(120 + GENERATED // 10)
def test_generated_yaml_reads_as_kubectl_reads_it(cluster: Any) -> None:
    batch = _generated(GENERATED)
    found: list[str] = []
    for start in range(0, len(batch), PER_RUN):
        run = batch[start : start + PER_RUN]
        found += disagreements(cluster, [(name, text, "generated") for name, text in run])
    assert not found, f"{len(found)} of {len(batch)} cases disagree:\n" + "\n".join(found[:40])
