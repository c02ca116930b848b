"""``python -m pytest_theodolite points PATH::TEST --point LOAD:INSTANCES ...``: where should a gate's loads
go? Runs the chosen (load, instances) sub-experiments of a gate's benchmark under the gates' own protocol -- with
the gate's marker's settings, overridden by the project's ini keys, overridden by ``--set KEY=VALUE`` in the
marker's own words (``MODULE:BENCHMARK`` names a benchmark without a gate) -- on the Kafka and Spark a pytest run
of the project would use (its ini keys; ``--kafka``, ``--spark-master`` ... as for pytest), prints each as it
ends (the line a gate prints), then a table: the verdict, the lag slope's interval against its threshold, how the
measurement ended, the CPU per record, the instances' share of their CPU, and the median micro-batch. A point
whose interval ends near its threshold, or whose instances spend nearly all their CPU, is at a capacity edge:
its verdict flips between runs, and a gate should not use it.

``--capacity INSTANCES ...`` measures those instance counts' capacities instead or as well -- the records/s
each sustains, with its interval, as the capacity strategy measures them, offered the keys of ``--load`` (by
default the highest point's load): a gate's loads belong well below or well above each capacity, not at it.
A point named twice runs twice, each run its own row and raw series (repetitions 0, 1, ...): how far a point's
verdict moves between runs is what tells an edge.

Exit code 0 once every point was measured (whatever its verdict), 2 on bad input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from pytest_theodolite.cli.project import ProjectInputError, gate_marker, read_ini
from pytest_theodolite.core.cost import PointCost
from pytest_theodolite.core.job_contract import JobContractError
from pytest_theodolite.core.records import SERIES_BATCH_DURATION, SubExperimentRecord
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.slo import LAG_TREND
from pytest_theodolite.engine.benchmark import Benchmark
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement
from pytest_theodolite.engine.capacity_search import CapacitySearch
from pytest_theodolite.engine.markers import GateSpec, GateSpecError, gate_spec
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import (
    GATE_OPTION_KEYS,
    OPTIONS,
    SettingsError,
    TheodoliteSettings,
    build,
    ini_name,
)
from pytest_theodolite.report.progress import progress_line
from pytest_theodolite.store.results import read_series

EXIT_OK = 0
EXIT_BAD_INPUT = 2

HEADER = (
    "| load | instances | verdict | lag slope [95 % interval] | threshold | stop | CPU us per record "
    "| share of the instances' CPU | median batch, s | wall, s |\n"
    "|---:|---:|---|---|---:|---|---:|---:|---:|---:|"
)


CAPACITY_HEADER = (
    "| instances | capacity, records/s [95 % interval] | status | CPU us per record at capacity "
    "| per-batch s | wall, s |\n"
    "|---:|---|---|---:|---:|---:|"
)


class PointsInputError(ValueError):
    """An argument of ``points`` that cannot be used; the message says what was wrong and how to fix it."""


def load_benchmark(reference: str, search_path: Path) -> Benchmark:
    """The Benchmark named ``module:attribute`` (``module`` importable from `search_path`, as pytest's rootdir
    makes a gate's modules importable)."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise PointsInputError(
            f"expected MODULE:BENCHMARK, such as myjob_gate:PAGES or mypackage.gates:PAGES, got {reference!r}"
        )
    if str(search_path) not in sys.path:
        sys.path.insert(0, str(search_path))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise PointsInputError(
            f"{module_name} cannot be imported from {search_path}: {type(exc).__name__}: {exc} (run from the "
            "directory the module is importable from, or install the project with pip install -e .)"
        ) from None
    value: Any = module
    for part in attribute.split("."):
        value = getattr(value, part, None)
        if value is None:
            raise PointsInputError(f"{module_name} has no {attribute}")
    if not isinstance(value, Benchmark):
        raise PointsInputError(
            f"{reference} is a {type(value).__name__}, not a pytest_theodolite.Benchmark: name the Benchmark "
            "your gate's marker takes"
        )
    return value


def parse_point(text: str) -> tuple[int, int]:
    try:
        load, instances = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOAD:INSTANCES such as 4000:1, got {text!r}") from None
    if load < 1 or instances < 1:
        raise argparse.ArgumentTypeError(f"load and instances must be positive, got {text!r}")
    return load, instances


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number such as 2, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON where it parses (numbers, true/false, objects), else as text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE such as instance_cpu=0.25, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def series_values(
    results: Path, load: int, instances: int, series: str, repetitions: Iterable[int] | None = None
) -> list[float]:
    """Every value the runner sampled into one raw series of a point (all repetitions, or those given)."""
    if repetitions is None:
        paths = sorted(results.glob(f"*_{load}_{instances}_{series}_*.csv"))
    else:
        paths = [
            p for r in repetitions for p in sorted(results.glob(f"*_{load}_{instances}_{series}_{r}.csv"))
        ]
    return [v for path in paths for v in read_series(path).values.tolist()]


def median_batch_s(
    results: Path, load: int, instances: int, repetitions: Iterable[int] | None = None
) -> float | None:
    """The median of the batch durations the runner sampled at a point (its ``batch-duration`` series)."""
    durations = series_values(results, load, instances, SERIES_BATCH_DURATION, repetitions)
    return statistics.median(durations) / 1000 if durations else None


def point_row(
    record: SubExperimentRecord, instance_cpu: float | None, batch_s: float | None, wall_s: float
) -> str:
    """One Markdown row: the verdict and what explains it."""
    verdict = next((v for v in record.verdicts if v.name == LAG_TREND), record.verdicts[0])
    slope = "none" if verdict.value is None else f"{verdict.value:+.0f}"
    if verdict.low is not None and verdict.high is not None:
        slope += f" [{verdict.low:+.0f}, {verdict.high:+.0f}]"
    cost = record.cpu_us_per_record
    cores = (1.0 if instance_cpu is None else instance_cpu) * record.resources
    share = cost * 1e-6 * record.target_rate / cores if cost is not None and record.target_rate else None
    stop = record.repetitions[-1].protocol.get("stop") if record.repetitions else None
    cells = [
        record.load,
        record.resources,
        record.outcome.value,
        slope,
        "-" if verdict.threshold is None else f"{verdict.threshold:.0f}",
        stop or "-",
        "-" if cost is None else f"{cost:.1f}",
        "-" if share is None else f"{share:.0%}",
        "-" if batch_s is None else f"{batch_s:.2f}",
        f"{wall_s:.0f}",
    ]
    return "| " + " | ".join(map(str, cells)) + " |"


def capacity_row(measurement: CapacityMeasurement, cost: PointCost | None, wall_s: float) -> str:
    """One Markdown row of the sweep: the capacity, how certain, and what a record costs at it."""
    estimate = measurement.estimate
    cells = [
        measurement.instances,
        "-" if estimate is None else estimate.text(),
        measurement.status + (f": {measurement.reason}" if measurement.reason and estimate is None else ""),
        "-" if cost is None else f"{cost.cpu_us_per_record:.1f}",
        "-" if estimate is None or estimate.per_batch_s is None else f"{estimate.per_batch_s:.2f}",
        f"{wall_s:.0f}",
    ]
    return "| " + " | ".join(map(str, cells)) + " |"


def measure_point(runner: ExperimentRunner, load: int, instances: int) -> SubExperimentRecord:
    """One run of a point, as its row shows it: a point named again is one more repetition of it, its raw series
    kept beside the earlier ones' and its row that run's alone."""
    if (load, instances) not in runner.records:
        return runner.run_sub_experiment(load, instances)
    combined = runner.confirm_sub_experiment(load, instances)
    return SubExperimentRecord.from_repetitions(
        load, instances, combined.target_rate, [combined.repetitions[-1]]
    )


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_theodolite points",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "benchmark",
        metavar="GATE",
        help="a gate test, PATH::TEST (its marker's settings, then the project's ini keys, then --set), or "
        "MODULE:BENCHMARK, the Benchmark a gate's marker takes (the ini keys, then --set)",
    )
    parser.add_argument(
        "--point",
        type=parse_point,
        action="append",
        default=[],
        metavar="LOAD:INSTANCES",
        dest="points",
        help="run this point (repeat for more; a point named again runs again, as its next repetition)",
    )
    parser.add_argument(
        "--capacity",
        type=positive_int,
        action="append",
        default=[],
        metavar="INSTANCES",
        dest="capacities",
        help="measure this instance count's capacity (repeat for a sweep)",
    )
    parser.add_argument(
        "--load",
        type=positive_int,
        default=None,
        help="the load whose keys a capacity measurement offers (default: the highest --point load)",
    )
    parser.add_argument(
        "--set",
        type=parse_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="settings",
        help="a theodolite marker key, as the gate sets it (instance_cpu=0.25, threshold=5%%, spark_conf={...})",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="where the raw series go (default: a new temporary directory)",
    )
    cluster = parser.add_argument_group(
        "where Kafka and Spark come from", "as for pytest; unset: the project's ini key, then the default"
    )
    for flag, ini, _, help_text in OPTIONS:
        if flag not in NOT_FOR_POINTS:
            help_text = f"{help_text} [ini: {ini}]".replace("%", "%%")
            cluster.add_argument(flag, dest=ini, default=None, metavar="VALUE", help=help_text)
    return parser


#: options of a gate run that mean nothing to `points` (it keeps its raw series in --results and judges nothing)
NOT_FOR_POINTS = (
    "--theodolite-results",
    "--theodolite-baselines",
    "--theodolite-isolation",
    "--theodolite-compare-ref",
    "--theodolite-calibration-max-age",
)


def project_settings(
    args: argparse.Namespace, ini: Mapping[str, str], instance_counts: set[int]
) -> TheodoliteSettings:
    """Where Kafka and Spark come from: the command line, else the project's ini key, else the default -- as a
    pytest run of the project would have them; at most as many instances as the points ask for, unless set."""

    def get(flag: str) -> str | None:
        ini_key = ini_name(flag)
        value = getattr(args, ini_key, None)
        return ini.get(ini_key) if value is None else value

    settings = build(get, (ini.get("theodolite_kafka_properties") or "").splitlines(), rootdir=Path.cwd())
    if get("--theodolite-max-instances") in (None, ""):
        return replace(settings, max_instances=max(instance_counts))
    if settings.max_instances < max(instance_counts):
        raise PointsInputError(
            f"--theodolite-max-instances is {settings.max_instances}, and the points ask for "
            f"{max(instance_counts)} instances: raise it or measure fewer"
        )
    return settings


@dataclass(frozen=True)
class PointsPlan:
    """What ``points`` measures, with which gate settings, on which Kafka and Spark."""

    spec: GateSpec
    infra: TheodoliteSettings
    capacity_load: int
    ini_file: Path | None


def plan_points(args: argparse.Namespace, rootdir: Path) -> PointsPlan:
    """The gate settings as a gate run of the project takes them -- the marker, overridden by the project's ini
    keys and --theodolite-instance-cpu, overridden by --set -- and the cluster options (command line, else ini)."""
    ini_file, ini = read_ini(rootdir)
    given: Mapping[str, Any] = dict(args.settings)
    if "::" in args.benchmark:
        gate = gate_marker(args.benchmark, rootdir)
        marker = {k: v for k, v in gate.kwargs.items() if k not in ("loads", "resources")}
        marker_args = gate.args
    else:
        marker, marker_args = {}, (load_benchmark(args.benchmark, rootdir),)
    if {"loads", "resources"} & set(given):
        raise PointsInputError(
            "the points name the loads and instances: --point LOAD:INSTANCES or --capacity INSTANCES, not --set"
        )
    if not args.points and not args.capacities:
        raise PointsInputError("nothing to measure: give --point LOAD:INSTANCES or --capacity INSTANCES")
    if args.capacities and args.load is None and not args.points:
        raise PointsInputError("--capacity needs --load LOAD: the load whose keys the generator offers")
    capacity_load = args.load or max((load for load, _ in args.points), default=0)
    loads = {load for load, _ in args.points} | ({capacity_load} if args.capacities else set())
    instance_counts = {instances for _, instances in args.points} | set(args.capacities)
    infra = project_settings(args, ini, instance_counts)
    overrides = {
        **{key: ini[f"theodolite_{key}"] for key in GATE_OPTION_KEYS if ini.get(f"theodolite_{key}")},
        **infra.gate_overrides,
    }
    spec = gate_spec(
        marker_args,
        {**marker, **given, "loads": sorted(loads), "resources": sorted(instance_counts)},
        {key: value for key, value in overrides.items() if key not in given},
    )
    spec.benchmark.check_job()
    return PointsPlan(spec, infra, capacity_load, ini_file)


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    args = _build_parser().parse_args(argv)
    try:
        plan = plan_points(args, Path(os.getcwd()))
    except (PointsInputError, GateSpecError, JobContractError, ProjectInputError, SettingsError) as exc:
        stderr.write(f"points: {exc}\n")
        return EXIT_BAD_INPUT
    spec, infra, capacity_load = plan.spec, plan.infra, plan.capacity_load
    settings = spec.settings
    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-points-"))
    if plan.ini_file is not None:
        stdout.write(f"points: the ini keys of {plan.ini_file}\n")
    rows, capacity_rows = [], []
    with open_kafka(infra) as kafka, open_spark(infra) as spark:
        writer = new_writer(results, "points", spec.benchmark, settings, Metric.DEMAND, {})
        runner = ExperimentRunner(spec.benchmark, settings, kafka, spark, writer)
        if args.capacities:
            # offered the capacity load's keys: the sweep's runner knows only that load
            sweep_settings = replace(settings, loads=(capacity_load,), resources=tuple(args.capacities))
            sweep = CapacitySearch(ExperimentRunner(spec.benchmark, sweep_settings, kafka, spark, writer))
            walls: dict[int, float] = {}
            mark = time.monotonic()

            def report(measurement: CapacityMeasurement) -> None:
                nonlocal mark
                now = time.monotonic()
                walls[measurement.instances] = walls.get(measurement.instances, 0.0) + now - mark
                mark = now
                stdout.write(f"theodolite: {spec.benchmark.name} {measurement.progress_text()}\n")
                stdout.flush()

            sweep.on_measurement = report
            sweep.measure_capacities(args.capacities)
            for instances, measurement in sweep.measurements.items():
                cost = sweep.cost(instances, settings.instance_cpu)
                capacity_rows.append(capacity_row(measurement, cost, walls.get(instances, 0.0)))
        for load, instances in args.points:
            started = time.monotonic()
            record = measure_point(runner, load, instances)
            stdout.write(f"theodolite: {spec.benchmark.name} {progress_line(record, runner.timings)}\n")
            stdout.flush()
            rows.append(
                point_row(
                    record,
                    settings.instance_cpu,
                    median_batch_s(results, load, instances, [r.repetition for r in record.repetitions]),
                    time.monotonic() - started,
                )
            )
    if capacity_rows:
        stdout.write(
            f"\n{spec.benchmark.name}: capacities, offered the keys of load {capacity_load}\n{CAPACITY_HEADER}\n"
            + "\n".join(capacity_rows)
            + "\n"
        )
    if rows:
        stdout.write(f"\n{spec.benchmark.name}\n{HEADER}\n" + "\n".join(rows) + "\n")
    stdout.write(f"\nraw results: {results}\n")
    return EXIT_OK
