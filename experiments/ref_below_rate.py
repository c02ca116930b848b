"""How often REF passes one instance below the demand its stored baseline names: the prediction
`ref_below=false` makes (REF needs what the baseline says), measured where pull-request runs ran REF below.

Reads the results directories of pull-request-mode runs (each with ``ref/``), the stored baselines, and lists
every REF sub-experiment at one instance count below the baseline's demand at its load, with the calibration's
reading of the testbed against the baseline's host and the share of the rate both sides were offered. A PASS
there is a load where the baseline's demand overstated REF's: where `ref_below=false` leaves REF out (each load
weighing at least the baseline's, comparison.weighs_at_least_the_baselines), the change would have been judged
against a demand one too high -- a one-instance regression that does not move the cost per record would not
show.

    python experiments/ref_below_rate.py /tmp/s96/pr/clean-1 /tmp/s97/pr/clean-1
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.engine.calibration import (
    REFERENCE_CPU,
    Calibration,
    baseline_reference_cpu,
    speed_ratio,
)
from pytest_theodolite.judge.comparison import offered_share, weighs_at_least_the_baselines
from pytest_theodolite.report.quality import Rate
from pytest_theodolite.store.baseline import Baseline, load_baseline
from pytest_theodolite.store.results import list_experiment_ids, read_results


def _host_speed(testbed: dict, baseline: Baseline) -> float | None:
    """The run's testbed over the baseline's host by their calibrations, as the run's session read it
    (TheodoliteSession.host_speed)."""
    rows_per_s = testbed.get("calibration_rows_per_s")
    if rows_per_s is None:
        return None
    limited = REFERENCE_CPU if testbed.get("instance_cpu") is not None else None
    calibration = Calibration(rows_per_s, spread=0.0, instance_cpu=limited)
    return speed_ratio(baseline.testbed.calibration_rows_per_s, calibration, baseline_reference_cpu(baseline))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="results directories of pull-request-mode runs")
    parser.add_argument("--baselines", type=Path, default=Path("baselines"), help="the stored baselines")
    args = parser.parse_args()
    below = passed = guarded = guarded_passed = 0
    for run in args.runs:
        directory = run / "ref"
        if not directory.is_dir():
            parser.error(
                f"{run} has no ref/ directory: give the results directory of a pull-request-mode run"
            )
        for experiment in list_experiment_ids(directory):
            path = args.baselines / f"{experiment}.json"
            if not path.is_file():
                continue
            baseline = load_baseline(path)
            results = read_results(directory, experiment)
            speed = _host_speed(results.settings.get("testbed", {}), baseline)
            in_guard = weighs_at_least_the_baselines(speed, offered_share(speed))
            for record in results.sub_experiments:
                expected = baseline.demand.get(record.load)
                if expected is None or record.resources != expected - 1:
                    continue
                below += 1
                passed += record.outcome is Outcome.PASS
                guarded += in_guard
                guarded_passed += in_guard and record.outcome is Outcome.PASS
                certain = "certain" if all(rep.certain for rep in record.repetitions) else "uncertain"
                read = (
                    f"{speed:.2f}x, offered {offered_share(speed):.2f}x"
                    if speed is not None
                    else "not calibrated"
                )
                print(
                    f"{run}  {experiment} {record.load} on {record.resources} (baseline {expected}):"
                    f" {record.outcome.name} ({certain}), testbed {read}"
                )
    if not below:
        parser.error("no REF sub-experiment one instance below a stored demand in these runs")
    print(f"REF passed one below the baseline's demand: {Rate.of(passed, below).text}")
    if guarded:
        print(
            "  where each load weighed at least the baseline's even on the fastest host the calibration allows"
            f" (where ref_below=false leaves REF out): {Rate.of(guarded_passed, guarded).text}"
        )
    if below - guarded:
        print(
            f"  elsewhere (REF run below by either setting): {Rate.of(passed - guarded_passed, below - guarded).text}"
        )


if __name__ == "__main__":
    main()
