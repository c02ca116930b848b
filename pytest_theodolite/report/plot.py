"""The scalability plots: the measured demand function against the reference's, and -- where the capacity
strategy measured them -- each instance count's capacity against the reference's (need matplotlib, the "plot"
extra)."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.store.baseline import Baseline

PLOT_INSTALL_HINT = "pip install 'pytest-theodolite[plot]'"


class PlotDependencyMissing(ImportError):
    """matplotlib is not installed; the message says how to install it."""


def scalability_plot(
    path: str | os.PathLike[str],
    benchmark_name: str,
    measured: DemandResult,
    baseline: Baseline | None,
    reference: str = "baseline",
    measured_label: str = "measured",
) -> Path:
    """A PNG of measured (and baseline, or REF's in pull-request mode) demand over load; "none" is drawn on a
    top row labelled "none", unmeasured loads as crosses on the load axis, an at-most demand as an open
    downward triangle, a demand above the instances run as an open upward one at the most that failed. Written
    atomically; returns the path."""
    figure, axes = _new_figure()
    baseline_demand = dict(baseline.demand) if baseline is not None else {}
    numbers = [v for v in (*measured.demand.values(), *baseline_demand.values()) if v is not None]
    none_row = max([*numbers, *measured.resources, 1]) + 1  # one row above every instance count

    def draw(demand: Mapping[int, int | None], style: dict[str, Any], label: str) -> None:
        loads = sorted(demand)
        # NaN breaks the line at "none": a line into the none row would suggest counts in between.
        values = [math.nan if (value := demand[load]) is None else float(value) for load in loads]
        axes.plot(loads, values, label=label, **style)
        nones = [load for load in loads if demand[load] is None]
        if nones:
            axes.plot(
                nones,
                [none_row] * len(nones),
                linestyle="none",
                marker="v" if style.get("linestyle") == "--" else "^",  # both visible where they coincide
                markersize=9,
                color=style["color"],
                markerfacecolor="none" if style.get("linestyle") == "--" else style["color"],
                label=f"{label}: none",
            )

    if baseline is not None:
        draw(
            baseline_demand, {"color": "tab:gray", "linestyle": "--", "marker": "s", "alpha": 0.8}, reference
        )
    draw(
        {
            load: value
            for load, value in measured.demand.items()
            if load not in measured.unmeasured and load not in measured.above
        },
        {"color": "tab:blue", "linestyle": "-", "marker": "o", "linewidth": 2},
        measured_label,
    )
    # searches that stopped at the reference's demand, as open triangles pointing where the demand lies: a pass
    # there, fewer not run (on or below the mark); a FAIL there, more not run (above it)
    bounds = (
        ({load: measured.demand.get(load) for load in measured.at_most}, "v", "at most (fewer not run)"),
        (dict(measured.above), "^", "above (more not run)"),
    )
    for marks, marker, meaning in bounds:
        loads = sorted(load for load, value in marks.items() if value is not None)
        if loads:
            axes.plot(
                loads,
                [float(marks[load]) for load in loads],  # type: ignore[arg-type]
                linestyle="none",
                marker=marker,
                markersize=12,
                color="tab:blue",
                markerfacecolor="white",
                label=f"{measured_label}: {meaning}",
            )
    if measured.unmeasured:
        axes.plot(
            list(measured.unmeasured),
            [0] * len(measured.unmeasured),
            linestyle="none",
            marker="x",
            markersize=10,
            color="tab:red",
            clip_on=False,
            label="unmeasured (invalid/errored)",
        )

    step = max(1, math.ceil(none_row / 10))
    ticks = [*range(0, none_row, step), none_row]
    axes.set_yticks(ticks, [*map(str, ticks[:-1]), "none"])
    axes.axhline(none_row - 0.5, color="lightgray", linewidth=0.8)
    axes.set_ylim(0, none_row + 0.5)
    axes.set_xlabel("load (records/s)")
    axes.set_ylabel("instances")
    axes.set_title(f"{benchmark_name}: demand (fewest instances meeting the SLOs)")
    axes.grid(True, alpha=0.3)
    if not (measured.demand or measured.unmeasured or baseline_demand):
        axes.text(0.5, 0.5, "no load measured", transform=axes.transAxes, ha="center")
    else:
        axes.legend(loc="best", fontsize="small")
    return _save(figure, Path(path))


def capacity_plot(
    path: str | os.PathLike[str],
    benchmark_name: str,
    capacities: Mapping[int, CapacityEstimate],
    reference: Mapping[int, CapacityEstimate] | None = None,
    loads: Mapping[int, float] | None = None,
    reference_label: str = "baseline",
    measured_label: str = "measured",
) -> Path:
    """A PNG of capacity over instances (Theodolite's capacity metric): each measured mu(r) with its interval,
    the reference's beside it, a lower bound (instances that took all they were offered) as an open marker, and
    the gate's loads (`loads`: load -> records/s) as horizontal lines. Written atomically; returns the path."""
    figure, axes = _new_figure()

    def draw(estimates: Mapping[int, CapacityEstimate], offset: float, color: str, label: str) -> None:
        counts = sorted(estimates)
        shown = [estimates[r] for r in counts]
        values = [e.records_per_s for e in shown]
        # a figure without an interval (too few batches) gets no error bar
        below = [e.records_per_s - e.low if math.isfinite(e.low) else 0.0 for e in shown]
        above = [e.high - e.records_per_s if math.isfinite(e.high) else 0.0 for e in shown]
        xs = [r + offset for r in counts]
        axes.errorbar(xs, values, yerr=[below, above], color=color, marker="o", capsize=4, label=label)
        bounds = [(x, e.records_per_s) for x, e in zip(xs, shown, strict=True) if not e.saturated]
        if bounds:
            axes.plot(
                [x for x, _ in bounds],
                [v for _, v in bounds],
                linestyle="none",
                marker="^",
                markersize=10,
                markerfacecolor="none",
                color=color,
                label=f"{label}: at least (took all offered)",
            )

    if reference:
        draw(reference, -0.06, "tab:gray", reference_label)
    draw(capacities, 0.06 if reference else 0.0, "tab:blue", measured_label)
    for load, rate in sorted((loads or {}).items()):
        axes.axhline(rate, color="tab:orange", linewidth=0.8, alpha=0.7)
        axes.annotate(f"load {load}", (0.01, rate), xycoords=("axes fraction", "data"), fontsize="x-small")
    counts = sorted({*capacities, *(reference or {})})
    if counts:
        axes.set_xticks(counts)
    axes.set_ylim(bottom=0)
    axes.set_xlabel("instances")
    axes.set_ylabel("capacity (records/s)")
    axes.set_title(f"{benchmark_name}: capacity per instance count, measured directly")
    axes.grid(True, alpha=0.3)
    if not counts:
        axes.text(0.5, 0.5, "no capacity measured", transform=axes.transAxes, ha="center")
    else:
        axes.legend(loc="best", fontsize="small")
    return _save(figure, Path(path))


def _new_figure() -> tuple[Any, Any]:
    try:
        # Figure + Agg canvas directly: no pyplot, so no global figure state and no GUI backend is touched.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise PlotDependencyMissing(
            f"the scalability plot needs matplotlib, which is not installed: {PLOT_INSTALL_HINT}"
        ) from error
    figure = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _save(figure: Any, path: Path) -> Path:
    """Write the figure as PNG through a temporary file in the same directory: never a half-written plot."""
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            figure.savefig(file, format="png")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
