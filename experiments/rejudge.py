"""How many of a recorded gate run's points do the committed baselines judge? Reads the results directories of
gate runs (``python -m pytest benchmarks --theodolite-results DIR``, or gate_quality.py's ``clean-N``), takes
each experiment's demand function and testbed calibration as recorded, and judges it against
``baselines/<benchmark>.json`` as the plugin does (judge.comparison.compare, calibration_mismatch), once as
before one-sided verdicts (a testbed beyond the calibration margin: every point not comparable) and once as
now. Prints per point the baseline, the measured demand, the calibration ratio and both verdicts, then the
judged counts. Demand only: the cost figures are not re-judged.

    python experiments/rejudge.py /tmp/gq/clean/clean-1
    python experiments/rejudge.py RUN... --baselines baselines
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_theodolite.core.outcomes import Verdict
from pytest_theodolite.core.scalability import DemandResult
from pytest_theodolite.engine.calibration import (
    Calibration,
    baseline_reference_cpu,
    calibration_mismatch,
    speed_ratio,
)
from pytest_theodolite.judge.comparison import compare
from pytest_theodolite.store.baseline import baseline_path, load_baseline
from pytest_theodolite.store.results import list_experiment_ids

ROOT = Path(__file__).resolve().parents[1]


def judge(run: Path, baselines: Path) -> list[tuple[str, int, str, str, float | None, Verdict, Verdict]]:
    """(benchmark, load, baseline, measured, speed ratio, verdict before, verdict now) per recorded point."""
    rows = []
    for benchmark in list_experiment_ids(run):
        document = json.loads((run / f"exp{benchmark}_results.json").read_text())
        recorded = document.get("demand")  # None: pull-request mode's sides, which record no demand here
        baseline = load_baseline(baseline_path(baselines, benchmark), benchmark)
        if recorded is None or baseline is None:
            continue
        testbed = document["settings"].get("testbed", {})
        rows_per_s = testbed.get("calibration_rows_per_s")
        calibration = (
            None if rows_per_s is None else Calibration(float(rows_per_s), 0.0, testbed.get("instance_cpu"))
        )
        reference_cpu = baseline_reference_cpu(baseline)
        mismatch = calibration_mismatch(baseline.testbed.calibration_rows_per_s, calibration, reference_cpu)
        speed = speed_ratio(baseline.testbed.calibration_rows_per_s, calibration, reference_cpu)
        measured = DemandResult(
            demand={int(load): resources for load, resources in recorded["optimum"]},
            loads=tuple(recorded["loads"]),
            resources=tuple(recorded["resources"]),
        )
        before = compare(measured, baseline, measured_testbed=None, not_comparable=mismatch)
        now = compare(measured, baseline, measured_testbed=None, not_comparable=mismatch, host_speed=speed)
        for old, new in zip(before.points, now.points, strict=True):
            rows.append(
                (benchmark, new.load, new.baseline_text, new.measured_text, speed, old.verdict, new.verdict)
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="results directories, one per gate run")
    parser.add_argument("--baselines", type=Path, default=ROOT / "baselines")
    args = parser.parse_args()
    judged_before = judged_now = total = 0
    print("run | benchmark | load | baseline | measured | speed | before | now")
    for run in args.runs:
        for benchmark, load, baseline, measured, speed, before, now in judge(run, args.baselines):
            ratio = "n/a" if speed is None else f"{speed:.2f}x"
            print(
                f"{run} | {benchmark} | {load} | {baseline} | {measured} | {ratio} | {before.label} | {now.label}"
            )
            total += 1
            judged_before += before is not Verdict.NOT_COMPARABLE
            judged_now += now is not Verdict.NOT_COMPARABLE
    print(f"judged: {judged_before} of {total} before one-sided verdicts, {judged_now} of {total} now")


if __name__ == "__main__":
    main()
