"""How steady is the testbed calibration? Runs it N times in one session (the variants side by side) and prints
each figure, the spread within each calibration, and the run-to-run coefficient of variation -- the figure the
calibration margin (pytest_theodolite/engine/calibration.py, DEFAULT_MARGIN) must stay well above. Both figures: the
rows/s (wall clock) and the instance's CPU microseconds per row (cgroup accounting), which the CPU-per-record
cost figure is normalised by (pytest_theodolite/core/cost.py).

    python experiments/calibration_spread.py [--runs 6] [--rows 1000000]
"""

from __future__ import annotations

import argparse
import statistics

from pytest_theodolite.engine import calibration
from pytest_theodolite.engine.services import open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with open_spark(TheodoliteSettings(max_instances=1)) as cluster:
        figures, cpu_figures = [], []
        for run in range(args.runs):
            result = calibration.calibrate(cluster, rows=args.rows)
            figures.append(result.rows_per_s)
            if result.cpu_us_per_row is not None:
                cpu_figures.append(result.cpu_us_per_row)
            print(f"run {run + 1}: {result.describe()}", flush=True)
    print()
    for values, unit in ((figures, "rows/s"), (cpu_figures, "CPU us per row")):
        if len(values) < 2:
            print(f"{unit}: fewer than 2 figures (the instance's CPU could not be read)")
            continue
        mean = statistics.mean(values)
        print(
            f"{len(values)} calibrations, {unit}: mean {mean:,.3f}, min {min(values):,.3f}, max {max(values):,.3f}, "
            f"coefficient of variation {statistics.stdev(values) / mean:.1%}, max/min {max(values) / min(values):.3f}"
        )


if __name__ == "__main__":
    main()
