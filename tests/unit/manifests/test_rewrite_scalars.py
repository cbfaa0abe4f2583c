"""``fix`` keeps every value it does not patch as the user wrote it, byte for byte.

A re-serialised scalar can change its meaning for the next reader: ``+_1`` is the integer 1 to
YAML 1.1 (https://yaml.org/type/int.html, kubectl's reader) and a string to YAML 1.2; ``1e400``
overflows to infinity; ``-0755`` is octal to YAML 1.1 and decimal to 1.2; ``null`` and ``~`` are
the null a blank stands for only by convention. None of them may be rewritten where no rule set
a value.
"""

from __future__ import annotations

import difflib

import yaml

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.manifests import Source, render_fixed
from tests.unit.helpers import EXAMPLES
from tests.unit.reports import cli

TCP = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()

ODD = TCP.replace(
    "  name: rapids-tcp\n",
    "  name: rapids-tcp\n"
    "  labels:\n"
    "    replicas: +_1\n"
    "    big: 1e400\n"
    "    mode: -0755\n"
    "    octal: 0o14\n"
    "    sexagesimal: 1:20\n"
    "    empty: null\n"
    "    tilde: ~\n"
    "    blank:\n"
    "    yes-no: yes\n"
    "    date: 2001-12-14\n",
    1,
).replace(
    "      containers:\n        - name: scheduler\n",
    "      containers:\n"
    "        - name: log-shipper\n"
    "          image: fluent/fluent-bit:3.2\n"
    "          env: null\n"
    "          securityContext: {runAsUser: +_1000, runAsGroup: 0x3e8}\n"
    "        - name: scheduler\n",
    1,
)


def test_values_outside_the_patched_paths_stay_byte_for_byte() -> None:
    patch = evaluate(yaml.safe_load(ODD), None, None).patch
    assert patch, "the document needs a fix"
    written = render_fixed(Source("odd.yaml", ODD), {0: [("", patch)]})
    removed = [
        line
        for line in difflib.ndiff(ODD.splitlines(), written.splitlines())
        if line.startswith("- ")
    ]
    assert removed == []  # only additions: every line of the input is still there, unchanged
    for line in ODD.splitlines():
        assert line in written.splitlines()


def test_untouched_nulls_stay_as_written(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "odd.yaml"
    path.write_text(ODD)
    assert cli(["fix", "-i", str(path)])[0] == 0
    text = path.read_text()
    assert "          env: null\n" in text
    assert "    empty: null\n    tilde: ~\n    blank:\n" in text
    assert "runAsUser: +_1000, runAsGroup: 0x3e8" in text
