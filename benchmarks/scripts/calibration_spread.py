"""How steady is the testbed calibration? Runs it N times in one session (the variants side by side) and prints
each figure, the spread within each calibration, and the run-to-run coefficient of variation -- the figure the
calibration margin (pytest_theodolite/calibration.py, DEFAULT_MARGIN) must stay well above.

    python benchmarks/scripts/calibration_spread.py [--runs 6] [--rows 1000000]
"""

from __future__ import annotations

import argparse
import statistics

from pytest_theodolite import calibration
from pytest_theodolite.services import open_spark
from pytest_theodolite.settings import TheodoliteSettings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with open_spark(TheodoliteSettings(max_instances=1)) as cluster:
        figures = []
        for run in range(args.runs):
            result = calibration.calibrate(cluster, rows=args.rows)
            figures.append(result.rows_per_s)
            print(f"run {run + 1}: {result.describe()}", flush=True)
    mean = statistics.mean(figures)
    print(
        f"\n{args.runs} calibrations: mean {mean:,.0f} rows/s, min {min(figures):,.0f}, max {max(figures):,.0f}, "
        f"coefficient of variation {statistics.stdev(figures) / mean:.1%}, max/min {max(figures) / min(figures):.2f}"
    )


if __name__ == "__main__":
    main()
