"""``python -m pytest_theodolite history RESULTS_DIR... [--out DIR] [--otava PROGRAM]``: runs lined up by commit,
and their change points marked by Apache Otava.

Prints each benchmark's runs in time order (started, commit, each load's demand and CPU per record, each
instance count's capacity), writes them as ``DIR/<benchmark>.csv`` with ``DIR/otava.yaml``, and, where the
``otava`` program is installed (``pipx install apache-otava``: its own environment, as it pins numpy and scipy),
runs ``otava analyze`` over them and prints the change points it finds. A pull-request run's directory counts
as its change. Exit 2 on bad input; Otava's own exit code where it fails.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from pytest_theodolite.cli.export import experiments
from pytest_theodolite.report.export import figures
from pytest_theodolite.report.history import (
    Run,
    check_lined_up,
    csv_file_name,
    histories,
    history_csv,
    history_table,
    otava_config,
)
from pytest_theodolite.store.results import ExperimentResults

EXIT_OK, EXIT_BAD_INPUT = 0, 2
OTAVA_CONFIG = "otava.yaml"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_theodolite history", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("results_dirs", nargs="+", type=Path, metavar="RESULTS_DIR")
    parser.add_argument(
        "--out", type=Path, default=Path("theodolite-history"), help="where the CSVs and otava.yaml go"
    )
    parser.add_argument(
        "--otava",
        default="otava",
        metavar="PROGRAM",
        help="the otava program (default: 'otava' on PATH; 'none': only write the files)",
    )
    return parser


def run_of(source: Path, results: ExperimentResults) -> Run:
    """The run's start and revision as recorded; a run recorded before they were: its results file's time and
    no commit."""
    environment = results.environment
    started_text = environment.get("started")
    if started_text:
        started = datetime.fromisoformat(str(started_text))
    else:
        json_path = source / f"exp{results.experiment_id}_results.json"
        stamp = json_path.stat().st_mtime if json_path.exists() else source.stat().st_mtime
        started = datetime.fromtimestamp(stamp, UTC)
    revision = environment.get("revision") or {}
    return Run(source, started, revision.get("commit"), bool(revision.get("dirty")), tuple(figures(results)))


def collect_runs(directories: Sequence[Path], stderr: TextIO) -> list[Run]:
    return [run_of(source, results) for source, results in experiments(directories, stderr)]


def analyse_with_otava(
    program: str, out: Path, benchmarks: Sequence[str], stdout: TextIO, stderr: TextIO
) -> int:
    found = shutil.which(program)
    command = [program, "analyze", "--config-file", str(out / OTAVA_CONFIG), *benchmarks]
    if found is None:
        print(
            f"change points: {program!r} is not installed. Install Apache Otava in its own environment "
            f"(`pipx install apache-otava`) and run: {' '.join(command)}",
            file=stderr,
        )
        return EXIT_OK
    completed = subprocess.run([found, *command[1:]], capture_output=True, text=True, check=False)
    stdout.write(completed.stdout)
    if completed.returncode != 0:
        print(f"error: {' '.join(command)} exited {completed.returncode}:\n{completed.stderr}", file=stderr)
    return completed.returncode


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    args = _parser().parse_args(argv)
    try:
        runs = collect_runs(args.results_dirs, stderr)
        check_lined_up(runs)
        lined_up = histories(runs)
        args.out.mkdir(parents=True, exist_ok=True)
        for history in lined_up:
            (args.out / csv_file_name(history.benchmark)).write_text(history_csv(history), encoding="utf-8")
        (args.out / OTAVA_CONFIG).write_text(otava_config(lined_up, args.out.resolve()), encoding="utf-8")
    except (ValueError, OSError) as error:  # ResultsError and HistoryError included: bad input, told plainly
        print(f"error: {error}", file=stderr)
        return EXIT_BAD_INPUT
    for history in lined_up:
        stdout.write(f"\n{history.benchmark}: {len(history.runs)} runs\n\n{history_table(history)}")
        incomplete = [c for c in history.columns if c not in history.complete_columns()]
        if incomplete:
            stdout.write(f"not in every run, so not analysed for change points: {', '.join(incomplete)}\n")
    print(f"\nwritten: {args.out}/{{<benchmark>.csv, {OTAVA_CONFIG}}}", file=stdout)
    analysable = [h.benchmark for h in lined_up if h.complete_columns() and len(h.runs) > 1]
    if args.otava == "none" or not analysable:
        if not analysable:
            print("change points: a benchmark needs two runs with a figure in common", file=stderr)
        return EXIT_OK
    return analyse_with_otava(args.otava, args.out, analysable, stdout, stderr)
