"""The benchmarks' own set-up runs on a fresh clone (nothing else runs them in CI)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.check_throughput import kubeconform_schemas


def test_kubeconform_gets_the_bundled_daskcluster_schema(tmp_path: Path) -> None:
    location = kubeconform_schemas(tmp_path / "schemas")
    assert location.endswith("{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json")
    written = tmp_path / "schemas" / "kubernetes.dask.org" / "daskcluster_v1.json"
    schema = json.loads(written.read_text())
    assert schema["properties"]["spec"]["additionalProperties"] is False
