"""The admission benchmark's report: each round's own difference to no admission, and the goals.

The benchmark needs the proving ground; its arithmetic does not, so it is checked here on runs
made up for the purpose.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.admission_latency import (
    PROCESSES,
    Run,
    Samples,
    _round_lines,
    added,
    cel_literal,
    compared,
    goals,
    peer_lines,
    ratios,
    report,
)


def run(p50_ms: float, cpu_ms: float, calls: float = 0.0) -> Run:
    """A run of 100 creates: its p50, and ``cpu_ms`` per create spread over the processes."""
    share = cpu_ms / 1000 * 100 / len(PROCESSES)
    return Run(p50_ms / 1000, 2 * p50_ms / 1000, 100, 0, calls, dict.fromkeys(PROCESSES, share))


def samples(none: list[float], after: list[float], cel: list[float]) -> Samples:
    """Rounds of none, after and cel (and their CPU-only and fixed modes) with these p50s."""
    return {
        "none": [run(v, 6.0) for v in none],
        "after": [run(v, 12.0, 100) for v in after],
        "cel": [run(v, 8.0) for v in cel],
        "fixed": [run(v, 11.0, 100) for v in after],
        "cpu-none": [run(v, 6.0) for v in none],
        "cpu-after": [run(v, 6.0) for v in none],
    }


def test_added_is_each_rounds_own_difference() -> None:
    rounds = samples(none=[5, 9, 6], after=[8, 13, 9], cel=[6, 10, 7])
    assert [round(a * 1000, 6) for a in added(rounds, "after", lambda r: r.p50)] == [3, 4, 3]
    assert ratios([3.0, 4.0], [1.0, 0.0]) == [3.0, float("inf")]


@pytest.mark.parametrize(
    ("after", "verdict"),
    [([7, 7, 7], "**met**"), ([9, 9, 9], "**missed**")],
    ids=["2x", "4x"],
)
def test_goal_lines_say_met_or_missed(after: list[float], verdict: str) -> None:
    levels = {1: samples(none=[5, 5, 5], after=after, cel=[6, 6, 6])}
    latency, cpu = goals(levels)
    assert verdict in latency
    assert "**missed**" in cpu  # 6 ms of CPU added against the peer's 2: 3x


def test_report_has_every_round_and_the_spread() -> None:
    levels = {c: samples(none=[5, 6, 7], after=[9, 9, 10], cel=[6, 8, 8]) for c in (1, 10)}
    sizes: dict[str, dict[str, Any]] = {
        m: {"stored": 2000, "no managedFields": 1500, "pod": 3000, "as sent": 1}
        for m in ("none", "after", "cel", "fixed")
    }
    sizes["input"] = {"stored": 1200}
    bench: Any = SimpleNamespace(modes=list(levels[1]), gpu_modes=["none", "after", "cel", "fixed"])
    setup = {
        "date": "2026-12-02",
        "machine": "2 CPUs",
        "load": "1.0",
        "command": "python -m benchmarks.admission_latency",
        "rounds": 3,
        "before": None,
        "before_current": False,
    }
    text = report(setup, levels, sizes, bench)
    assert "| 1 | 0 | 5.0 | 4.0 | 1.0 | 4.0 |" in text  # round 0: its own none, after, cel
    assert "| 10 | 2 | 7.0 | 3.0 | 1.0 | 3.0 |" in text
    assert "| 1 | after | 9.0 | **3.0** | 3.0 to 4.0 |" in text
    assert "spec stored exactly as sent: yes" in text


def test_floor_modes_are_compared_with_the_peer_and_ours_with_the_floor() -> None:
    levels = {c: samples(none=[5, 6, 7], after=[9, 9, 10], cel=[6, 8, 8]) for c in (1, 10)}
    for rounds in levels.values():
        rounds["floor"] = [run(v, 9.0, 100) for v in (7, 8, 9)]  # adds 2 ms: 2x the peer's 1
        rounds["floor-patch"] = [run(v, 10.0, 100) for v in (8, 8, 9)]
    shown, pairs = compared(list(levels[1]))
    assert shown == ["after", "cel", "floor", "floor-patch"]
    assert pairs == [
        ("after", "cel"),
        ("floor", "cel"),
        ("floor-patch", "cel"),
        ("after", "floor-patch"),
    ]
    lines = peer_lines(levels)
    assert lines[0].startswith("- added p50 at 1 client: `floor` 2.0 ms (2.0 to 2.0), `cel` 1.0")
    assert "**2.0x**" in lines[0]
    # CPU: floor adds 3 ms per create, the peer 2 ms; ours 6 ms, the floor with our patch 4 ms
    assert "`floor` 3.0 ms (3.0 to 3.0), `cel` 2.0 ms (2.0 to 2.0): **1.5x**" in lines[2]
    assert "`after` 6.0 ms (6.0 to 6.0), `floor-patch` 4.0 ms (4.0 to 4.0): **1.5x**" in lines[8]
    assert lines[-1].endswith(".")
    # The round table: none, after, cel, floor, floor-patch, then the four ratios.
    round_0 = "| 1 | 0 | 5.0 | 4.0 | 1.0 | 2.0 | 3.0 | 4.0 | 2.0 | 3.0 | 1.3 |"
    assert round_0 in "\n".join(_round_lines(levels, list(levels[1])))


def test_the_full_cel_peer_is_compared_with_ours_the_floor_and_the_peer() -> None:
    levels = {c: samples(none=[5, 6, 7], after=[9, 9, 10], cel=[6, 8, 8]) for c in (1, 10)}
    for rounds in levels.values():
        rounds["cel-full"] = [run(v, 9.0) for v in (7, 8, 9)]  # adds 2 ms and 3 ms of CPU
        rounds["floor"] = [run(v, 9.0, 100) for v in (7, 8, 9)]
        rounds["floor-patch"] = [run(v, 10.0, 100) for v in (8, 8, 9)]
    shown, pairs = compared(list(levels[1]))
    assert shown == ["after", "cel", "cel-full", "floor", "floor-patch"]
    assert pairs[-3:] == [("after", "cel-full"), ("floor-patch", "cel-full"), ("cel-full", "cel")]
    lines = peer_lines(levels)
    assert not any(
        line.startswith("- added p50 at 1 client: `after`") and "`cel` " in line for line in lines
    )
    # ours adds 6 ms of CPU, the full CEL peer 3 ms, the CEL peer 2 ms
    assert "`after` 6.0 ms (6.0 to 6.0), `cel-full` 3.0 ms (3.0 to 3.0): **2.0x**" in lines[11]
    assert "`cel-full` 3.0 ms (3.0 to 3.0), `cel` 2.0 ms (2.0 to 2.0): **1.5x**" in lines[17]
    # Round 0 at 1 client: added p50 after 4, cel 1, cel-full 2, floor 2, floor-patch 3; then
    # the ratios after/cel, floor/cel, floor-patch/cel, after/floor-patch, after/cel-full,
    # floor-patch/cel-full, cel-full/cel.
    round_0 = (
        "| 1 | 0 | 5.0 | 4.0 | 1.0 | 2.0 | 2.0 | 3.0 | 4.0 | 2.0 | 3.0 | 1.3 | 2.0 | 1.5 | 2.0 |"
    )
    assert round_0 in "\n".join(_round_lines(levels, list(levels[1])))


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ({"nvidia.com/gpu": "1"}, '{"nvidia.com/gpu": "1"}'),
        (["a", "b"], '["a", "b"]'),
        (
            {"runAsUser": 65532, "runAsNonRoot": True},
            '{"runAsUser": dyn(65532), "runAsNonRoot": dyn(true)}',
        ),
        ([{"name": "x"}], '[dyn({"name": "x"})]'),
        ({"a": None, "b": 1.5}, '{"a": dyn(null), "b": dyn(1.5)}'),
        ('say "hi"', '"say \\"hi\\""'),
    ],
    ids=["strings", "string-list", "mixed-scalars", "list-of-maps", "null-float", "escaped"],
)
def test_cel_literals_are_homogeneous_or_dyn(value: Any, literal: str) -> None:
    assert cel_literal(value) == literal
