"""The scale benchmark records its runs as the rows the figures read."""

from __future__ import annotations

from benchmarks.results import load
from benchmarks.scale import Run, Size, rows


def test_a_recorded_run_has_the_fields_of_the_runs_already_recorded() -> None:
    run = Run(Size(15000, 3000, 30000), "drift", 15000, tls=3.04, readyz=3.1, full=4.26)
    run.first_pass_metric, run.first_pass_value, run.rss, run.hwm = 29.96, 28.0, 2**28, 2**28
    run.admission = {"webhooks": 12.94, "no webhooks": 5.0}
    (row,) = rows([run])
    recorded = load("scale")["runs"][0]["rows"][0]
    assert set(row) == set(recorded)
    assert (row["gpu_nodes"], row["cpu_nodes"], row["clusters"]) == (15000, 3000, 30000)
    assert (row["full_inventory_s"], row["drift_first_pass_s"], row["vmhwm_mib"]) == (
        4.3,
        30.0,
        256,
    )
    assert row["admission_p50_ms"] == 12.9
