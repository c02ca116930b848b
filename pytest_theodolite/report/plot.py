"""The scalability plot: the measured demand function against the reference's (needs matplotlib, the
"plot" extra)."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
    top row labelled "none", unmeasured loads as crosses on the load axis. Written atomically; returns the
    path."""
    try:
        # Figure + Agg canvas directly: no pyplot, so no global figure state and no GUI backend is touched.
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise PlotDependencyMissing(
            f"the scalability plot needs matplotlib, which is not installed: {PLOT_INSTALL_HINT}"
        ) from error

    baseline_demand = dict(baseline.demand) if baseline is not None else {}
    numbers = [v for v in (*measured.demand.values(), *baseline_demand.values()) if v is not None]
    none_row = max([*numbers, *measured.resources, 1]) + 1  # one row above every instance count

    figure = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()

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
        {load: value for load, value in measured.demand.items() if load not in measured.unmeasured},
        {"color": "tab:blue", "linestyle": "-", "marker": "o", "linewidth": 2},
        measured_label,
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
    figure.tight_layout()

    path = Path(path)
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
