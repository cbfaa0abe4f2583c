"""The docs and the code read the same finding table."""

from __future__ import annotations

import re

from dask_gpu_parity.core.findings import RULES
from tests.unit.helpers import ROOT


def test_every_rule_is_documented_with_its_name_severity_and_a_section() -> None:
    text = (ROOT / "docs" / "findings.md").read_text()
    rows = dict(re.findall(r"^\| \[(DGP\d{3})\]\(#dgp\d{3}\) \| ([a-z-]+) \|", text, re.M))
    assert set(rows) == set(RULES)
    for code, rule in RULES.items():
        assert rows[code] == rule.name, code
        assert f"## {code}\n" in text, f"{code} has no section"
    severities = dict(
        re.findall(r"^\| \[(DGP\d{3})\]\(#dgp\d{3}\) \| [a-z-]+ \| (\w+) \|", text, re.M)
    )
    assert severities == {c: str(r.severity) for c, r in RULES.items()}
