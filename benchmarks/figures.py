"""The plots of docs/performance.md, drawn from the recorded results as SVG in docs/figures/.

Usage: python -m benchmarks.figures [--check]    (make figures)

Every point comes from ``benchmarks/results/*.json`` (``benchmarks/results.py``); nothing is typed
in here. The SVG is byte-stable for a given matplotlib (the ``figures`` extra pins it): no date,
a fixed hash salt for the ids, text kept as text. ``--check`` writes nothing and exits 1 when a
committed figure is not what its results draw (``tests/unit/repo/test_figures.py`` does the same).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.results import ROOT, load

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

__all__ = ["FIGURES", "OUT", "main", "render"]

OUT = ROOT / "docs" / "figures"
STYLE: dict[RcKeyType, Any] = {
    "svg.hashsalt": "dask-gpu-parity",  # ids of clip paths and markers: the same every run
    "svg.fonttype": "none",  # text as text: small files, no glyph outlines to drift
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 5.0,
}
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
Row = dict[str, Any]


def _median(value: Any) -> float:
    return float(statistics.median(value)) if isinstance(value, list) else float(value)


def _rows(data: dict[str, Any], **match: Any) -> list[tuple[dict[str, Any], Row]]:
    """(run, row) pairs whose run or row has every ``match`` value."""
    return [
        (run, row)
        for run in data["runs"]
        for row in run["rows"]
        if all(row.get(k, run.get(k)) == v for k, v in match.items())
    ]


def _size_ticks(ax: Any, rows: Iterable[Row]) -> None:
    sizes = sorted({(r["clusters"], r["gpu_nodes"]) for r in rows})
    ax.set_xticks([c for c, _ in sizes])
    ax.set_xticklabels([f"{c:,}\n{g:,} GPU nodes" for c, g in sizes])
    ax.set_xlabel("DaskClusters (and GPU nodes)")


def _line(ax: Any, rows: Sequence[Row], y: str, label: str, colour: str, **kw: Any) -> None:
    points = sorted((r["clusters"], _median(r[y])) for r in rows if r.get(y) is not None)
    if points:
        ax.plot(*zip(*points, strict=True), marker="o", color=colour, label=label, **kw)


def _spread(ax: Any, rows: Sequence[Row], y: str, label: str, colour: str) -> None:
    """Median with the fastest and slowest run as whiskers."""
    rows = sorted((r for r in rows if r.get(y)), key=lambda r: r["clusters"])
    if not rows:
        return
    xs = [r["clusters"] for r in rows]
    mid = [_median(r[y]) for r in rows]
    low = [m - min(r[y]) for m, r in zip(mid, rows, strict=True)]
    high = [max(r[y]) - m for m, r in zip(mid, rows, strict=True)]
    ax.errorbar(xs, mid, yerr=[low, high], marker="o", capsize=3, color=colour, label=label)


def _operator_axes(
    time_ax: Any, memory_ax: Any, time_legend: str, memory_legend: str, title: str
) -> None:
    """The operator figures' two panels (ready and first pass in seconds, memory in MiB), titled."""
    time_ax.figure.suptitle(title, x=0.01, ha="left")
    time_ax.set_ylabel("seconds from the operator's start")
    time_ax.set_title("Ready and first drift pass", loc="left")
    memory_ax.set_ylabel("MiB (high-water mark)")
    memory_ax.set_title("Operator memory", loc="left")
    _legend(time_ax, time_legend)
    _legend(memory_ax, memory_legend)


def _legend(ax: Any, loc: str) -> None:
    if ax.get_legend_handles_labels()[0]:  # an empty legend is a warning
        ax.legend(loc=loc)


def _log_seconds(ax: Any) -> None:
    """A log axis labelled 1, 2, 5, 10, 20, ... as plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _operator_scale(fig: Any) -> None:
    data = load("scale")
    sweep = [row for _, row in _rows(data, label="three sizes")]
    quiet = [row for _, row in _rows(data, label="largest size, quieter machine")]
    run = next(r for r in data["runs"] if r["label"] == "three sizes")
    time_ax, memory_ax = fig.subplots(1, 2)
    for ax in (time_ax, memory_ax):
        _size_ticks(ax, sweep)
    modes = (("no-drift", COLOURS[0]), ("drift", COLOURS[1]))
    for mode, colour in modes:
        rows = [r for r in sweep if r["mode"] == mode]
        _line(time_ax, rows, "full_inventory_s", f"full inventory ({mode})", colour, ls="--")
        _line(memory_ax, rows, "vmhwm_mib", f"VmHWM ({mode})", colour)
    drift = [r for r in sweep if r["mode"] == "drift"]
    _line(time_ax, drift, "drift_first_pass_s", "drift first pass", COLOURS[2])
    for r in quiet:
        colour = dict(modes)[r["mode"]]
        memory_ax.plot(r["clusters"], r["vmhwm_mib"], "s", mfc="none", color=colour)
        time_ax.plot(r["clusters"], r["full_inventory_s"], "s", mfc="none", color=colour)
        if r.get("drift_first_pass_s") is not None:
            time_ax.plot(r["clusters"], r["drift_first_pass_s"], "s", mfc="none", color=COLOURS[2])
    (quieter,) = [r for r in data["runs"] if r["label"] == "largest size, quieter machine"]
    for ax in (time_ax, memory_ax):
        ax.plot([], [], "s", mfc="none", color="grey", label=f"quieter ({quieter['commit']})")
    memory_ax.set_ylim(bottom=0)
    _operator_axes(
        time_ax,
        memory_ax,
        "upper left",
        "lower right",
        f"dask-gpu-parity run at fleet scale ({run['date']}, {run['commit']})",
    )


FLEET = "to 15,000 GPU nodes"  # the run in scale.json that the fleet figure extrapolates from
EXTRAPOLATE_TO = 65_000  # nodes: GKE's largest supported cluster


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least squares ``y = a + b x``: (a, b)."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def _operator_fleet(fig: Any) -> None:
    """The fleet sweep against all nodes, each measure's straight line drawn on to 65,000."""
    data = load("scale")
    (run,) = [r for r in data["runs"] if r["label"] == FLEET]
    time_ax, memory_ax = fig.subplots(1, 2)
    measures = (
        (time_ax, "full_inventory_s", "drift", "full inventory", COLOURS[0], 15.0),
        (time_ax, "drift_first_pass_s", "drift", "drift first pass", COLOURS[2], 30.0),
        (memory_ax, "vmhwm_mib", "drift", "VmHWM (drift)", COLOURS[1], 250e6 / 2**20),
        (memory_ax, "vmhwm_mib", "no-drift", "VmHWM (no drift)", COLOURS[0], None),
    )
    for ax, key, mode, label, colour, goal in measures:
        points = [
            (row["gpu_nodes"] + row["cpu_nodes"], float(row[key]))
            for row in run["rows"]
            if row["mode"] == mode and row.get(key) is not None
        ]
        if len(points) < 2:
            continue
        a, b = fit(points)
        ax.plot(*zip(*points, strict=True), marker="o", color=colour, label=label)
        last = max(x for x, _ in points)
        ax.plot(
            [last, EXTRAPOLATE_TO], [a + b * last, a + b * EXTRAPOLATE_TO], ls=":", color=colour
        )
        ax.annotate(
            f"{a + b * EXTRAPOLATE_TO:.0f}",
            (EXTRAPOLATE_TO, a + b * EXTRAPOLATE_TO),
            textcoords="offset points",
            xytext=(-4, 4),
            ha="right",
            color=colour,
        )
        if goal is not None:
            ax.axhline(goal, color=colour, lw=0.8, alpha=0.5)
    for ax in (time_ax, memory_ax):
        ax.set_xlim(0, EXTRAPOLATE_TO * 1.02)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("nodes, GPU and CPU (5 : 1), with 2 DaskClusters per GPU node")
        ax.plot([], [], ls=":", color="grey", label="least squares, drawn on")
        ax.plot([], [], lw=0.8, color="grey", alpha=0.5, label="goal")
    _operator_axes(
        time_ax,
        memory_ax,
        "upper left",
        "upper left",
        f"dask-gpu-parity run on a growing fleet, drawn on to {EXTRAPOLATE_TO:,} nodes "
        f"({run['date']}, {run['commit']})",
    )


def _drift_pass(fig: Any) -> None:
    data = load("drift_pass")
    sweeps = [r for r in data["runs"] if len({row["clusters"] for row in r["rows"]}) > 1]
    points = [r for r in data["runs"] if r not in sweeps]
    cpu_ax, heap_ax = fig.subplots(1, 2)
    for n, run in enumerate(sweeps):
        colour = COLOURS[n % len(COLOURS)]
        _size_ticks(cpu_ax, run["rows"])
        _size_ticks(heap_ax, run["rows"])
        label = f"{run['date']}, {run['commit']}"
        _spread(cpu_ax, run["rows"], "first_pass_cpu_s", f"first pass ({label})", colour)
        _line(cpu_ax, run["rows"], "clusters_in_cpu_s", "clusters in", colour, ls=":")
        _line(heap_ax, run["rows"], "heap_after_mib", f"kept after the pass ({label})", colour)
        _line(heap_ax, run["rows"], "heap_peak_mib", "peak", colour, ls=":")
    for n, run in enumerate(points):
        for row in run["rows"]:
            if row.get("tree") == "after" and row.get("first_pass_cpu_s"):
                colour = COLOURS[(len(sweeps) + n) % len(COLOURS)]
                label = f"earlier: {run['date']}, {run['commit']}"
                _spread(cpu_ax, [row], "first_pass_cpu_s", label, colour)
    cpu_ax.set_ylabel("CPU seconds (median, fastest to slowest)")
    cpu_ax.set_ylim(bottom=0)
    cpu_ax.set_title("Drift watch, in process: CPU", loc="left")
    heap_ax.set_ylabel("MiB of Python heap (tracemalloc)")
    heap_ax.set_ylim(bottom=0)
    heap_ax.set_title("Drift watch, in process: memory", loc="left")
    _legend(cpu_ax, "upper left")
    _legend(heap_ax, "upper left")


def _audit_scale(fig: Any) -> None:
    data = load("audit_scale")
    time_ax, memory_ax = fig.subplots(1, 2)
    every = [row for _, row in _rows(data)]
    for ax in (time_ax, memory_ax):
        _size_ticks(ax, every)
    for n, run in enumerate(data["runs"]):
        for tree in sorted({row.get("tree", "") for row in run["rows"]}):
            rows = [row for row in run["rows"] if row.get("tree", "") == tree]
            colour = COLOURS[(2 * n + (tree == "after")) % len(COLOURS)]
            commits = dict.fromkeys(row.get("commit", run["commit"]) for row in rows)
            label = f"{tree}: {'/'.join(commits)}, {run['date']}"
            label += f", {run['legend']}" if run.get("legend") else ""
            _spread(time_ax, rows, "seconds", label, colour)
            _line(memory_ax, rows, "peak_rss_mib", label, colour)
    _log_seconds(time_ax)
    time_ax.set_ylabel("wall seconds (log scale)")
    time_ax.set_title("audit -A -o json: median of the runs, fastest to slowest", loc="left")
    memory_ax.set_ylabel("MiB (peak RSS)")
    memory_ax.set_ylim(bottom=0)
    memory_ax.set_title("audit memory", loc="left")
    _legend(time_ax, "upper left")
    _legend(memory_ax, "upper left")


def _operator_dra(fig: Any) -> None:
    """The DRA fleet's runs, a fix apart: a group of bars per commit."""
    runs = [r for r in load("scale")["runs"] if r.get("dra")]
    time_ax, memory_ax = fig.subplots(1, 2)
    bars = (  # axis, field, mode, colour, hatch, offset, width
        (time_ax, "full_inventory_s", "no-drift", COLOURS[0], "//", -0.27, 0.27),
        (time_ax, "full_inventory_s", "drift", COLOURS[1], "//", 0.0, 0.27),
        (time_ax, "drift_first_pass_s", "drift", COLOURS[2], None, 0.27, 0.27),
        (memory_ax, "vmhwm_mib", "no-drift", COLOURS[0], None, -0.18, 0.36),
        (memory_ax, "vmhwm_mib", "drift", COLOURS[1], None, 0.18, 0.36),
    )
    for ax, key, mode, colour, hatch, offset, width in bars:
        points = [
            (x, row[key])
            for x, run in enumerate(runs)
            for row in run["rows"]
            if row["mode"] == mode and row.get(key) is not None
        ]
        label = f"{key.removesuffix('_s').removesuffix('_mib').replace('_', ' ')} ({mode})"
        ax.bar(
            [x + offset for x, _ in points],
            [v for _, v in points],
            width=width,
            color=colour,
            hatch=hatch,
            edgecolor="white",
            label=label.replace("vmhwm", "VmHWM"),
        )
    for ax in (time_ax, memory_ax):
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels([r["commit"] for r in runs])
        ax.set_xlabel("commit, each a fix after the one before (docs/performance.md)")
    row = runs[0]["rows"][0]
    _operator_axes(
        time_ax,
        memory_ax,
        "upper right",
        "lower right",
        f"A DRA fleet: {row['gpu_nodes']:,} GPU nodes on NVIDIA's DRA driver, "
        f"{row['clusters']:,} DaskClusters ({runs[0]['date']})",
    )


FIGURES: dict[str, Callable[[Any], None]] = {
    "operator-scale.svg": _operator_scale,
    "operator-dra.svg": _operator_dra,
    "operator-fleet.svg": _operator_fleet,
    "drift-pass.svg": _drift_pass,
    "audit-scale.svg": _audit_scale,
}


def render(name: str) -> bytes:
    """The SVG of figure ``name``, byte for byte as ``make figures`` writes it."""
    import matplotlib  # the 'figures' extra: only make figures needs it
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(10.0, 4.2), layout="constrained")
        FIGURES[name](fig)
        out = io.BytesIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("the figures need matplotlib: make figures installs it", file=sys.stderr)
        return 2
    stale = []
    for name in FIGURES:
        svg, path = render(name), args.out / name
        if args.check:
            if not path.exists() or path.read_bytes() != svg:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(svg)
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if stale:
        print(f"not what the results draw (run make figures): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
