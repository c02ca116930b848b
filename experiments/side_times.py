"""How much of a pull-request-mode run each side's sub-experiments took: reads the results directories of such
runs (each with ``ref/`` and ``change/``) and sums, per side, the set-up, warm-up, measured and teardown time of
every repetition it ran. With a run's wall time (gate_quality.py prints it) this says what pull-request mode
costs against one revision alone, measured in the same run on the same host.

    python experiments/side_times.py /tmp/gq/clean-1 --wall-min 69.7
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_theodolite.pull_request.paired import SIDES
from pytest_theodolite.store.results import list_experiment_ids, read_results

PHASES = ("setup_ms", "warmup_ms", "measurement_ms", "teardown_ms")


def side_seconds(run: Path, side: str) -> tuple[int, float]:
    """(repetitions run, seconds they took) of one side of one run."""
    repetitions, total_ms = 0, 0.0
    directory = run / side
    for experiment in list_experiment_ids(directory):
        for record in read_results(directory, experiment).sub_experiments:
            for repetition in record.repetitions:
                repetitions += 1
                total_ms += sum(float(repetition.counters.get(phase, 0)) for phase in PHASES)
    return repetitions, total_ms / 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="results directories of pull-request-mode runs")
    parser.add_argument("--wall-min", type=float, nargs="*", default=[], help="each run's wall time, minutes")
    args = parser.parse_args()
    if args.wall_min and len(args.wall_min) != len(args.runs):
        parser.error(f"--wall-min: give one wall time per run ({len(args.runs)}), got {len(args.wall_min)}")
    for run in args.runs:
        missing = [side for side in SIDES if not (run / side).is_dir()]
        if missing:
            parser.error(
                f"{run} has no {' or '.join(f'{side}/' for side in missing)}: give the --theodolite-results "
                "directory of a pull-request-mode run (--theodolite-compare-ref)"
            )
    print("| run | side | repetitions | minutes | wall time / side |")
    print("|---|---|---:|---:|---:|")
    for index, run in enumerate(args.runs):
        for side in SIDES:
            repetitions, seconds = side_seconds(run, side)
            ratio = f"{args.wall_min[index] * 60 / seconds:.2f}x" if args.wall_min and seconds else "-"
            print(f"| {run} | {side} | {repetitions} | {seconds / 60:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
