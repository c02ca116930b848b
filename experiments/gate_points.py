"""Where should a gate's loads go? Runs chosen (load, instances) sub-experiments of a use case under the gates'
own protocol (primed without the CPU limit, settled, measured until the lag slope's interval is certain) and
prints, per point, the verdict, the slope with its interval against the threshold, how the measurement ended,
the instances' CPU per record and share of their quota, the sink's rows written per input record, the
median micro-batch, and the rows in the job's state stores (the peak of the run's first and second half: a
state that keeps growing with the records read peaks higher in the second half; one whose old windows are
evicted rises and falls with the windows and peaks alike in both). A point whose
interval ends near its threshold, or whose instances run near their quota, is a capacity edge: its verdict
flips between runs, and a gate should not use it.

    python experiments/gate_points.py --uc 3 --pair 4000:1 --pair 8000:2 \\
        [--job-option output_mode=append] [--instance-cpu 0.25]
    python experiments/gate_points.py --benchmark uc4-elements --pair 8:1 --pair 12:2
    python experiments/gate_points.py --uc 1 --pair 4000:1 --cpu-hogs 4   # on a host others keep busy

``--cpu-hogs N`` runs N processes that spin on the CPU for the whole run, as other tenants of a shared CI
runner would; under the table, each point's instance-quota verdict says where the host's CPU went.

Job options are ``KEY=VALUE`` with VALUE read as JSON where it parses (numbers, true/false), else as text.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
from usecases import BENCHMARKS, QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_ELEMENTS

from pytest_theodolite.cli.points import median_batch_s, series_values
from pytest_theodolite.cli.points import parse_point as parse_pair
from pytest_theodolite.cli.points import parse_setting as parse_job_option
from pytest_theodolite.core.contention import INSTANCE_QUOTA
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.records import SERIES_STATE_ROWS, SubExperimentRecord
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.core.slo import LAG_TREND
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.markers import parse_threshold
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings

#: each use case's gate benchmark (``--uc N``)
USE_CASES = {1: UC1_KEYS, 2: UC2_KEYS, 3: UC3_KEYS, 4: UC4_ELEMENTS}


def add_benchmark_argument(parser: argparse.ArgumentParser) -> None:
    """``--uc N`` (the use case's gate benchmark) or ``--benchmark NAME`` (any of benchmarks/usecases.py)."""
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--uc", type=int, choices=sorted(USE_CASES))
    chosen.add_argument("--benchmark", choices=sorted(BENCHMARKS))


def chosen_benchmark(args: argparse.Namespace) -> Benchmark:
    return USE_CASES[args.uc] if args.uc is not None else BENCHMARKS[args.benchmark]


def gate_point_settings(
    loads: list[int],
    resources: list[int],
    instance_cpu: float,
    spark_conf: dict[str, str],
    *,
    threshold: str = "5%",
    max_batch_duration_s: float | None = None,
    max_late_rate: float | None = None,
) -> ExperimentSettings:
    """Settings that measure single points under the gates' default protocol (no search)."""
    return ExperimentSettings(
        loads=tuple(sorted(set(loads))),
        resources=tuple(sorted(set(resources))),
        duration_s=MeasurementPlan().min_duration_s,
        slo=SloSettings(
            warmup_s=0.0,
            lag_trend_threshold=parse_threshold(threshold),
            max_batch_duration_s=max_batch_duration_s,
            max_late_rate=max_late_rate,
        ),
        plan=MeasurementPlan(),
        instance_cpu=instance_cpu,
        spark_conf=spark_conf,
    )


def state_rows_halves(results: Path, load: int, instances: int) -> tuple[float, float] | None:
    """The most rows in the job's state stores in the first and in the second half of its sampled series
    (peaks, not medians: the state rises and falls with the windows it holds); None for a stateless job."""
    values = series_values(results, load, instances, SERIES_STATE_ROWS)
    if len(values) < 2:
        return None
    half = len(values) // 2
    return max(values[:half]), max(values[half:])


def point_row(
    record: SubExperimentRecord,
    instance_cpu: float,
    batch_s: float | None,
    wall_s: float,
    state: tuple[float, float] | None = None,
) -> str:
    """One Markdown row: the verdict and what explains it."""
    verdict = next((v for v in record.verdicts if v.name == LAG_TREND), record.verdicts[0])
    repetition = record.repetitions[0]
    slope = "none" if verdict.value is None else f"{verdict.value:+.0f}"
    if verdict.low is not None and verdict.high is not None:
        slope += f" [{verdict.low:+.0f}, {verdict.high:+.0f}]"
    threshold = "" if verdict.threshold is None else f"{verdict.threshold:.0f}"
    cost = record.cpu_us_per_record
    quota = (
        cost * 1e-6 * record.target_rate / (instance_cpu * record.resources)
        if cost is not None and record.target_rate
        else None
    )
    counters = repetition.counters
    written = (
        counters["records_written"] / counters["records_total"]
        if counters.get("records_total") and "records_written" in counters
        else None
    )
    cells = [
        record.load,
        record.resources,
        record.outcome.value,
        slope,
        threshold,
        repetition.protocol.get("stop"),
        "-" if cost is None else f"{cost:.1f}",
        "-" if quota is None else f"{quota:.0%}",
        "-" if written is None else f"{written:.2f}",
        "-" if batch_s is None else f"{batch_s:.2f}",
        "-" if state is None else f"{state[0]:.0f} -> {state[1]:.0f}",
        counters.get("records_dropped_late", "-"),
        f"{wall_s:.0f}",
    ]
    return "| " + " | ".join(map(str, cells)) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_benchmark_argument(parser)
    parser.add_argument("--pair", type=parse_pair, action="append", required=True, metavar="LOAD:INSTANCES")
    parser.add_argument(
        "--instance-cpu", type=float, default=0.25, help="cores per instance (the gates': 0.25)"
    )
    parser.add_argument(
        "--job-option", type=parse_job_option, action="append", default=[], metavar="KEY=VALUE"
    )
    parser.add_argument("--threshold", default="5%")
    parser.add_argument(
        "--max-batch-duration", type=float, default=None, metavar="S", help="the gate's batch-duration SLO"
    )
    parser.add_argument(
        "--max-late-rate",
        type=float,
        default=None,
        metavar="RECORDS_PER_S",
        help="the late-records SLO: records dropped as late per second after the warm-up",
    )
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument(
        "--cpu-hogs",
        type=int,
        default=0,
        metavar="N",
        help="processes that keep the host's CPU busy meanwhile",
    )
    args = parser.parse_args()
    benchmark = chosen_benchmark(args)
    if args.job_option:
        benchmark = replace(benchmark, job_options={**benchmark.job_options, **dict(args.job_option)})
    instance_cpu = args.instance_cpu
    settings = gate_point_settings(
        [load for load, _ in args.pair],
        [instances for _, instances in args.pair],
        instance_cpu,
        QUICK_WARMUP_EXECUTORS,
        threshold=args.threshold,
        max_batch_duration_s=args.max_batch_duration,
        max_late_rate=args.max_late_rate,
    )
    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-points-"))
    infra = TheodoliteSettings(max_instances=max(instances for _, instances in args.pair))
    rows = []
    print(
        f"{benchmark.name}, job options {dict(benchmark.job_options)}, {instance_cpu:g} core per instance, "
        f"{args.cpu_hogs} CPU hogs"
    )
    hosts = []
    with cpu_hogs(args.cpu_hogs), open_kafka(infra) as kafka, open_spark(infra) as spark:
        writer = new_writer(results, "points", benchmark, settings, Metric.DEMAND, {})
        runner = ExperimentRunner(benchmark, settings, kafka, spark, writer)
        for load, instances in args.pair:
            started = time.monotonic()
            record = runner.run_sub_experiment(load, instances)
            batch_s = median_batch_s(results, load, instances)
            state = state_rows_halves(results, load, instances)
            rows.append(point_row(record, instance_cpu, batch_s, time.monotonic() - started, state))
            quota = next((v for v in record.verdicts if v.name == INSTANCE_QUOTA), None)
            hosts.append(
                f"{load}:{instances} {'' if quota is None else quota.outcome.value}: {quota and quota.detail}"
            )
            print(rows[-1], flush=True)
    print(
        "\n| load | instances | verdict | lag slope [95 % interval], records/s | threshold | stop "
        "| CPU us per record | share of the quota | rows written per input record | median batch, s "
        "| state rows, peak of 1st -> 2nd half | records dropped as late (whole run) | wall, s |"
    )
    print("|---:|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print("\n".join(["", *hosts]))
    print(f"raw results: {results}")


def _spin() -> None:
    while True:
        pass


@contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """`count` processes spinning on the CPU until the block ends (other tenants of a shared runner)."""
    context = multiprocessing.get_context("spawn")
    hogs = [context.Process(target=_spin, daemon=True) for _ in range(count)]
    for hog in hogs:
        hog.start()
    try:
        yield
    finally:
        for hog in hogs:
            hog.terminate()
            hog.join(10)


if __name__ == "__main__":
    main()
