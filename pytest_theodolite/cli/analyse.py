"""`python -m pytest_theodolite analyse RESULTS_DIR`: recompute every verdict and the demand/capacity function
from the raw series of a results directory (Theodolite's offline analysis), without re-running anything.

The recorded verdicts are not trusted: every repetition is re-judged from its CSV files with the SLO settings
stored in the results JSON, overridden by the command-line options. Exit code 0 on success, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from pytest_theodolite.core.capacity import (
    SERIES_CAPACITY_ID,
    SERIES_CAPACITY_MS,
    SERIES_CAPACITY_ROWS,
    CapacityEstimate,
    capacity_from_series,
)
from pytest_theodolite.core.contention import SERIES_LIMITED_INSTANCE_CPU, HostUsage, host_usage
from pytest_theodolite.core.cost import (
    SERIES_INPUT_RECORDS,
    SERIES_INSTANCE_CPU,
    CostEstimate,
    cost_from_series,
    sub_experiment_cost,
)
from pytest_theodolite.core.estimators import SLOPE_METHODS, SlopeThreshold, TimeSeries
from pytest_theodolite.core.evaluation import SloSettings, evaluate_repetition
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.protocol import Stop, stop_of
from pytest_theodolite.core.records import (
    SERIES_BATCH_DURATION,
    SERIES_BATCH_END,
    SERIES_BATCH_ID,
    SERIES_EVENT_TIME_LATENCY,
    SERIES_GENERATOR_RATE,
    SERIES_LAG,
    SERIES_LATE_ROWS,
    RepetitionRecord,
    SubExperimentRecord,
)
from pytest_theodolite.core.scalability import (
    CapacityResult,
    DemandResult,
    Metric,
    capacity_from_sub_experiments,
    demand_from_sub_experiments,
)
from pytest_theodolite.core.slo import BATCH_DURATION, GENERATOR_RATE, LAG_TREND, SloVerdict
from pytest_theodolite.core.task_cpu import SERIES_CAPACITY_TASK_CPU_MS, task_cpu_from_series
from pytest_theodolite.store.results import (
    ExperimentResults,
    ResultsError,
    iter_repetition_series,
    read_results,
    read_series,
)

CAPACITY_SERIES = (SERIES_CAPACITY_ROWS, SERIES_CAPACITY_MS, SERIES_CAPACITY_ID)

EXIT_OK = 0
EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class Reanalysis:
    results: ExperimentResults
    slo_settings: SloSettings
    metric: Metric
    sub_experiments: tuple[SubExperimentRecord, ...]
    function: DemandResult | CapacityResult


def _host_usage(series: Mapping[str, TimeSeries], protocol: Mapping[str, Any]) -> HostUsage | None:
    """Where the host's CPU went while the repetition measured, from its series (core/contention.py); None
    for results recorded before the host was sampled."""
    recorded = protocol.get("host")
    if not recorded:
        return None
    return host_usage(
        series,
        instance_cpu=series.get(SERIES_LIMITED_INSTANCE_CPU),
        host_cores=int(recorded["host_cores"]),
        quota_cores=recorded.get("quota_cores"),
        instance_quota_cores=recorded.get("instance_quota_cores"),
    )


def _measured_cost(series: Mapping[str, TimeSeries], record: RepetitionRecord | None) -> CostEstimate | None:
    """The CPU per record over the repetition's measurement, from its raw series (which begin at the CPU
    limit): from its first lag sample plus the warm-up it recorded on; None where it recorded none (it never
    settled: nothing was measured)."""
    recorded = {} if record is None else record.protocol
    if "warmup_s" in recorded and recorded["warmup_s"] is None:
        return None
    warmup = recorded.get("warmup_s")
    start = None if warmup is None else float(series[SERIES_LAG].timestamps_s[0]) + float(warmup)
    return cost_from_series(series.get(SERIES_INSTANCE_CPU), series.get(SERIES_INPUT_RECORDS), start)


def reanalyse(
    results: ExperimentResults,
    slo_settings: SloSettings,
    metric: Metric | None = None,
    *,
    fixed_warmup: bool = False,
) -> Reanalysis:
    """Re-judge every sub-experiment that has a lag-trend file; compute demand (or capacity) from that.

    Each repetition is cut at the warm-up it recorded (an adaptive warm-up ends where the job settled) unless
    `fixed_warmup` says to use `slo_settings.warmup_s` for all; one that never settled stays a FAIL."""
    recorded = {(r.load, r.resources): r for r in results.sub_experiments}
    records = []
    for load, resources in results.points_with_lag():
        previous = recorded.get((load, resources))
        # The target rate the generator was asked for; without a record, the load is taken as records/s.
        target_rate = previous.target_rate if previous and previous.target_rate is not None else float(load)
        recorded_reps = {r.repetition: r for r in previous.repetitions} if previous else {}
        repetitions = []
        if previous is None and results.settings:
            # the results JSON lists every finished sub-experiment: raw series without a record are from one
            # that never finished (Ctrl-C, a crash); judging its partial series would invent a verdict
            unfinished = SloVerdict(
                LAG_TREND,
                Outcome.ERRORED,
                None,
                None,
                "unfinished: raw series without a record in the results JSON (the run was interrupted or crashed)",
            )
            reps = [RepetitionRecord(rep, (unfinished,)) for rep in results.repetitions_of(load, resources)]
            records.append(SubExperimentRecord.from_repetitions(load, resources, target_rate, reps))
            continue
        for repetition, series in iter_repetition_series(results, load, resources):
            recorded_rep = recorded_reps.get(repetition)
            counters = recorded_rep.counters if recorded_rep else {}
            protocol = dict(recorded_rep.protocol) if recorded_rep else {}
            use_recorded = not fixed_warmup and recorded_rep is not None
            # a repetition offered a share of the load's rate was judged at it (comparison.offered_share), its
            # bounds in seconds stretched as recorded (by its share; from 2026-11-27 until both runs were, the
            # run that judged a pass kept them; results before 2026-11-27 recorded no bounds_share)
            offered = protocol.get("offered_rate")
            stretched = protocol.get("bounds_share", protocol.get("offered_share", 1.0))
            verdicts = evaluate_repetition(
                slo_settings.dilated(float(stretched)),
                lag=series[SERIES_LAG],
                target_rate=target_rate if offered is None else float(offered),
                generator_rate=series.get(SERIES_GENERATOR_RATE),
                event_time_latency=series.get(SERIES_EVENT_TIME_LATENCY),
                batch_duration=series.get(SERIES_BATCH_DURATION),
                batch_ids=series.get(SERIES_BATCH_ID),
                batch_ends=series.get(SERIES_BATCH_END),
                warmup_s=recorded_rep.warmup_s if use_recorded and recorded_rep is not None else None,
                not_settled=protocol.get("failure") if use_recorded else None,
                beyond_batch_bound=(
                    protocol.get("failure")
                    if use_recorded and protocol.get("stop") == Stop.BEYOND_BATCH_BOUND.value
                    else None
                ),
                records_total=counters.get("records_total"),
                records_malformed=counters.get("records_malformed"),
                late_rows=series.get(SERIES_LATE_ROWS),
                host_usage=_host_usage(series, protocol),
            )
            lag = next(v for v in verdicts if v.name == LAG_TREND)
            batches = next((v for v in verdicts if v.name == BATCH_DURATION), None)
            batch_interval = (
                (batches.low, batches.high)
                if batches is not None and batches.low is not None and batches.high is not None
                else None
            )
            protocol["stop"] = stop_of(
                lag.low,
                lag.high,
                lag.threshold,
                protocol.get("stop"),
                batch_interval,
                None if batches is None else batches.threshold,
            )
            if protocol["stop"] != "not-settled":  # the re-fit decides its certainty; not settled as recorded
                protocol.pop("certain", None)
            # the CPU per record from the raw series where they were recorded, else as recorded
            cost = _measured_cost(series, recorded_rep)
            recorded_cost = recorded_rep.cost if recorded_rep else {}
            repetitions.append(
                RepetitionRecord(
                    repetition, verdicts, counters, protocol, cost.to_dict() if cost else dict(recorded_cost)
                )
            )
        records.append(SubExperimentRecord.from_repetitions(load, resources, target_rate, repetitions))
    metric = metric or results.metric or Metric.DEMAND
    points = [r.as_sub_experiment() for r in records]
    function: DemandResult | CapacityResult
    if metric is Metric.DEMAND:
        function = demand_from_sub_experiments(points, "offline")
        searched = results.demand
        if searched is not None and searched.at_most:
            # re-judging adds no runs: a load whose search stopped at a pass stays a bound where that pass
            # is still the fewest passing instances (a pass that now fails has a failure below the new one)
            bounded = tuple(
                load for load in searched.at_most if function.demand.get(load) == searched.demand.get(load)
            )
            function = replace(function, at_most=bounded)
        if searched is not None and searched.above:
            # the same for a search that stopped at a FAIL: above it while nothing run there passes now
            above = {load: n for load, n in searched.above.items() if function.demand.get(load) is None}
            function = replace(function, above=above)
        if searched is not None and searched.at_least:
            # REF's side of a certified load ran only below its bound: at least that while nothing run passes now
            at_least = tuple(load for load in searched.at_least if function.demand.get(load) is None)
            bounds = {load: searched.demand[load] for load in at_least}
            function = replace(function, demand={**function.demand, **bounds}, at_least=at_least)
    else:
        function = capacity_from_sub_experiments(points, "offline")
    return Reanalysis(results, slo_settings, metric, tuple(records), function)


def _format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render(analysis: Reanalysis) -> str:
    settings = analysis.slo_settings
    out = [
        (
            f"experiment {analysis.results.experiment_id}: {analysis.metric.value},"
            f" warm-up {settings.warmup_s:g} s,"
            f" lag-trend threshold {settings.lag_trend_threshold.describe()},"
            f" slope method {settings.slope_method},"
            f" {settings.confidence:.0%} intervals"
        ),
        "",
    ]
    rows = []
    for record in analysis.sub_experiments:
        lag = next(v for v in record.verdicts if v.name == LAG_TREND)
        generator = next((v for v in record.verdicts if v.name == GENERATOR_RATE), None)
        last = record.repetitions[-1].protocol if record.repetitions else {}
        warmup = last.get("warmup_s")
        cost = sub_experiment_cost(record)
        cost_cell = "-" if cost is None else f"{cost.cpu_us_per_record:.1f}"
        cost_interval = (
            "-"
            if cost is None or cost.low is None or cost.high is None
            else f"{cost.low:.1f}..{cost.high:.1f}"
        )
        rows.append(
            [
                str(record.load),
                str(record.resources),
                str(len(record.repetitions)),
                "-" if lag.value is None else f"{lag.value:.1f}",
                "-" if lag.low is None or lag.high is None else f"{lag.low:.1f}..{lag.high:.1f}",
                "-" if lag.threshold is None else f"{lag.threshold:.1f}",
                "-" if warmup is None else f"{warmup:.0f}s",
                str(last.get("stop") or "-"),
                cost_cell,
                cost_interval,
                "-" if generator is None else generator.outcome.value,
                record.outcome.value.upper(),
            ]
        )
    out.append(
        _format_table(
            [
                "load",
                "resources",
                "reps",
                "median slope",
                "interval",
                "threshold",
                "warm-up",
                "stop",
                "CPU us/record",
                "CPU interval",
                "generator",
                "outcome",
            ],
            rows,
        )
    )
    problems = [
        f"  {r.load}/{r.resources}: {v.name} {v.outcome.value}: {v.detail}"
        for r in analysis.sub_experiments
        for v in r.verdicts
        if not v.outcome.is_measured
    ]
    if problems:
        out += ["", "not judged (INVALID/ERRORED):", *problems]
    out.append("")
    function = analysis.function
    if isinstance(function, DemandResult):
        xs = sorted(set(function.demand) | set(function.unmeasured))
        out.append(_format_table(["load", "demand (resources)"], [[str(x), function.status(x)] for x in xs]))
    else:
        xs = sorted(set(function.capacity) | set(function.unmeasured))
        out.append(
            _format_table(["resources", "capacity (load)"], [[str(x), function.status(x)] for x in xs])
        )
    planned = analysis.results.loads if analysis.metric is Metric.DEMAND else analysis.results.resources
    not_run = [x for x in planned if x not in xs]
    if not_run:
        out.append(f"planned but without raw data (not run, e.g. skipped by LowerBound): {not_run}")
    if analysis.results.capacity_measurements:
        out += ["", render_capacities(analysis.results)]
    return "\n".join(out) + "\n"


def render_capacities(results: ExperimentResults) -> str:
    """The capacity strategy's capacities recomputed from their batch series, beside what was recorded."""
    rows = []
    for measurement in results.capacity_measurements:
        r, load = int(measurement["instances"]), int(measurement["load"])
        attempt = int(measurement.get("attempt", 0))
        series = [results.series_path(load, r, name, attempt) for name in CAPACITY_SERIES]
        recorded = (
            CapacityEstimate.from_dict(measurement["estimate"]) if measurement.get("estimate") else None
        )
        recomputed, task_cpu = None, None
        if all(path is not None for path in series):
            rows_s, ms_s, ids_s = (read_series(path) for path in series if path is not None)
            recomputed = capacity_from_series(measurement, rows_s, ms_s, ids_s)
            task_cpu_path = results.series_path(load, r, SERIES_CAPACITY_TASK_CPU_MS, attempt)
            if task_cpu_path is not None:
                task_cpu = task_cpu_from_series(measurement, rows_s, ids_s, read_series(task_cpu_path))
        rows.append(
            [
                str(r),
                f"{float(measurement.get('offered_rate', 0)):,.0f}",
                f"{int(measurement.get('batch_records', 0)):,}",
                "-" if recomputed is None else recomputed.text(),
                "-" if recorded is None else f"{recorded.records_per_s:,.0f}",
                str(measurement.get("status", "-")),
                "-" if task_cpu is None else f"{task_cpu.median_us:.2f}",
            ]
        )
    # a measurement repeated at a higher rate has a row of its own, after the first
    header = [
        "resources",
        "offered records/s",
        "batch cap",
        "capacity (recomputed)",
        "recorded",
        "status",
        "task CPU us/record (recomputed)",
    ]
    return _format_table(header, rows)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_theodolite", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    analyse = commands.add_parser(
        "analyse", help="recompute verdicts and demand/capacity from a results directory"
    )
    analyse.add_argument("results_dir", metavar="RESULTS_DIR")
    analyse.add_argument("--experiment", help="experiment id, when the directory holds several")
    analyse.add_argument(
        "--warmup",
        type=float,
        metavar="S",
        help="one fixed warm-up in seconds for every repetition (default: each repetition's recorded one)",
    )
    analyse.add_argument(
        "--confidence",
        type=float,
        metavar="C",
        help="confidence of the slope intervals (default: as recorded)",
    )
    threshold = analyse.add_mutually_exclusive_group()
    threshold.add_argument(
        "--threshold", type=float, metavar="X", help="absolute lag-trend threshold, records/s"
    )
    threshold.add_argument(
        "--threshold-relative", type=float, metavar="F", help="lag-trend threshold as a fraction of the load"
    )
    analyse.add_argument("--method", choices=SLOPE_METHODS, help="slope fit (default: as recorded)")
    analyse.add_argument(
        "--metric", choices=[m.value for m in Metric], help="default: as recorded, else demand"
    )
    return parser


def main(
    argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    args = _build_parser().parse_args(argv)
    try:
        if args.warmup is not None and args.warmup < 0:
            raise ValueError(f"--warmup must be >= 0 seconds, got {args.warmup:g}")
        results = read_results(args.results_dir, args.experiment)
        if not results.points_with_lag() and results.capacity_measurements:
            # the capacity strategy decided every load from the capacities: nothing ran under the lag trend
            stdout.write(f"experiment {results.experiment_id}: no lag-trend sub-experiments\n\n")
            stdout.write(render_capacities(results) + "\n")
            return EXIT_OK
        if not results.points_with_lag():
            raise ResultsError(
                f"no raw lag series of experiment {results.experiment_id} in {args.results_dir!r}:"
                f" expected files"
                f" like exp{results.experiment_id}_<load>_<resources>_lag-trend_<rep>.csv"
            )
        settings = results.slo_settings
        if args.warmup is not None:
            settings = replace(settings, warmup_s=args.warmup)
        if args.confidence is not None:
            settings = replace(settings, confidence=args.confidence)
        if args.threshold is not None:
            settings = replace(settings, lag_trend_threshold=SlopeThreshold(absolute=args.threshold))
        if args.threshold_relative is not None:
            settings = replace(
                settings, lag_trend_threshold=SlopeThreshold(relative_to_load=args.threshold_relative)
            )
        if args.method is not None:
            settings = replace(settings, slope_method=args.method)
        analysis = reanalyse(
            results,
            settings,
            Metric(args.metric) if args.metric else None,
            fixed_warmup=args.warmup is not None,
        )
    except (ValueError, OSError) as error:  # ResultsError included: bad input, told plainly
        print(f"error: {error}", file=stderr)
        return EXIT_BAD_INPUT
    stdout.write(render(analysis))
    return EXIT_OK
