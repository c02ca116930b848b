"""``python -m pytest_theodolite export RESULTS_DIR... --format bmf|github-action-benchmark``: each point's
demand, CPU per record and capacity as JSON for Bencher (``bencher run --adapter json --file FILE``) or
github-action-benchmark (``tool: customSmallerIsBetter``; the capacity, bigger is better, into a file of its
own). A pull-request run's directory exports its working tree's side (``change/``). Exit 2 on bad input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from pytest_theodolite.report.export import (
    FORMATS,
    MEASURES,
    ExportError,
    Figure,
    bmf,
    check_one_direction,
    figures,
    github_action_benchmark,
    tool_name,
)
from pytest_theodolite.store.results import ExperimentResults, ResultsError, list_experiment_ids, read_results

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_theodolite export", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("results_dirs", nargs="+", type=Path, metavar="RESULTS_DIR")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument(
        "--measures",
        default=None,
        metavar="M,M",
        help=f"which of {', '.join(MEASURES)} (default: all for bmf; demand,cpu-per-record for "
        "github-action-benchmark, whose files take one direction)",
    )
    parser.add_argument("--output", type=Path, metavar="FILE", help="write here instead of to stdout")
    return parser


def _measures(text: str | None, output_format: str) -> tuple[str, ...]:
    if text is None:
        return (
            tuple(MEASURES)
            if output_format == "bmf"
            else tuple(m for m, smaller in MEASURES.items() if smaller)
        )
    chosen = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in chosen if m not in MEASURES]
    if unknown or not chosen:
        raise ExportError(f"--measures {text!r}: choose from {', '.join(MEASURES)}, comma-separated")
    if output_format != "bmf":
        check_one_direction(chosen)
    return chosen


def experiment_dir(directory: Path, stderr: TextIO) -> Path:
    """A pull-request run's directory holds ref/ and change/: the change is what a history follows."""
    if not directory.is_dir():
        raise ResultsError(f"results directory {str(directory)!r} does not exist or is not a directory")
    if not list_experiment_ids(directory) and (directory / "change").is_dir():
        print(f"{directory}: a pull-request run's results: exporting its change/ side", file=stderr)
        return directory / "change"
    return directory


def experiments(directories: Sequence[Path], stderr: TextIO) -> Iterator[tuple[Path, ExperimentResults]]:
    """Every experiment of the directories given (a pull-request run's: its change), with its directory."""
    for directory in directories:
        source = experiment_dir(directory, stderr)
        ids = list_experiment_ids(source)
        if not ids:
            raise ResultsError(
                f"no results in {str(source)!r}: expected the exp<id>_results.json of a gate run"
            )
        for experiment in ids:
            yield source, read_results(source, experiment)


def collect(directories: Sequence[Path], measures: Sequence[str], stderr: TextIO) -> list[Figure]:
    return [
        f
        for _, results in experiments(directories, stderr)
        for f in figures(results)
        if f.measure in measures
    ]


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    args = _parser().parse_args(argv)
    try:
        measures = _measures(args.measures, args.format)
        found = collect(args.results_dirs, measures, stderr)
        if not found:
            raise ExportError(
                f"no {', '.join(measures)} figure in {', '.join(map(str, args.results_dirs))}: a demand needs a "
                "load whose demand is a number (not none, unmeasured or above the instances run), a capacity "
                "the capacity strategy or metric"
            )
        document: object = bmf(found) if args.format == "bmf" else github_action_benchmark(found)
    except (ValueError, OSError) as error:  # ResultsError and ExportError included: bad input, told plainly
        print(f"error: {error}", file=stderr)
        return EXIT_BAD_INPUT
    text = json.dumps(document, indent=2, sort_keys=args.format == "bmf") + "\n"
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
        print(f"{args.output}: {len(found)} figures", end="", file=stderr)
        if args.format != "bmf":
            print(f" (github-action-benchmark tool: {tool_name(found)})", end="", file=stderr)
        print(file=stderr)
    else:
        stdout.write(text)
    return EXIT_OK
