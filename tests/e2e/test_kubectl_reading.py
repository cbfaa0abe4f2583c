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
from dask_gpu_parity.manifests.kubescalar import INT64

from .kubectl_cases import case, hand_picked

pytestmark = pytest.mark.e2e

NIGHTLY = os.environ.get("HYPOTHESIS_PROFILE") == "nightly"
GENERATED, PER_RUN = (20_000 if NIGHTLY else 1_000), 1_000
# Where kubectl reads a document at random and the reader refuses it: two keys that become one
# JSON key (Go's map order decides which one kubectl keeps).
EITHER = "two keys become the key"


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


def kubectl_objects(cluster: Any, folder: Path) -> tuple[dict[str, list[Any]], str]:
    """kubectl's objects per case file stem, and its stderr."""
    proc = subprocess.run(
        [cluster.kubectl_bin, "--kubeconfig", str(cluster.kubeconfig), "create",
         "--dry-run=client", "-o", "json", "--validate=false", "-f", str(folder)],
        capture_output=True, text=True, env=cluster.env, timeout=300, check=False,
    )  # fmt: skip
    decoder = json.JSONDecoder(parse_int=_int_or_float, parse_float=_float)
    objects: dict[str, list[Any]] = {}
    text, position = proc.stdout, 0
    while (position := len(text) - len(text[position:].lstrip())) < len(text):
        obj, position = decoder.raw_decode(text, position)
        name = obj["metadata"]["name"]
        objects.setdefault(name.split("-")[0], []).append(_typed(obj))
    return objects, proc.stderr


def ours(path: Path) -> list[Any] | str:
    """The reader's objects of a file, or its refusal."""
    try:
        return [_typed(doc.data) for doc in parse(read_source(str(path)))]
    except FileError as exc:
        return f"refused: {exc.detail}"


def disagreements(cluster: Any, files: list[tuple[str, str, str]]) -> list[str]:
    """Each case where the reader and kubectl disagree, described in one line."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, text, _ in files:
            (folder / name).write_bytes(text.encode())
        printed, stderr = kubectl_objects(cluster, folder)
        refused_by_kubectl = set(re.findall(r"([ch]\d{5})\.(?:yaml|json)", stderr))
        found = []
        for name, text, what in files:
            stem = name.split(".")[0]
            mine = ours(folder / name)
            if isinstance(mine, str):
                agree = stem in refused_by_kubectl or EITHER in mine
                theirs: Any = "refused" if stem in refused_by_kubectl else printed.get(stem, [])
            else:
                agree = stem not in refused_by_kubectl and printed.get(stem, []) == mine
                theirs = printed.get(stem, [])
                if stem in refused_by_kubectl:
                    line = next(x for x in stderr.splitlines() if stem in x)
                    theirs = f"refused: {line.strip()[:300]}"
            if not agree:
                found.append(f"{name} ({what}): {text!r}\n  ours:    {mine}\n  kubectl: {theirs}")
    return found


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
