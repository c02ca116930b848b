"""One benchmark's experiment: sub-experiments (load l, instances r) chosen by a search strategy.

A sub-experiment repetition: fresh topics and checkpoint directory, a Spark session with exactly r executors,
the job's query, the load generator, lag sampled on a clock for warm-up + duration, then teardown in reverse
order (generator, query, session, topics, checkpoint) whatever happened. Its series are written as they are
measured; its verdicts come from the pure SLO functions, so ``python -m pytest_theodolite analyse`` can
recompute them from the files alone.

A query that dies, a broker that stops answering or an executor that is lost make the repetition ERRORED,
never a pass; a generator that cannot produce the load makes it INVALID.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_theodolite.core.contention import HostUsage, SlowSampling
from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.evaluation import SloSettings, evaluate_repetition
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.protocol import MeasurementProtocol, Phase, Stop
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.search import search_demand
from pytest_theodolite.core.slo import LAG_TREND, SloVerdict
from pytest_theodolite.engine import monitor
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings, experiment_settings_dict
from pytest_theodolite.engine.host_sampler import HostSampler
from pytest_theodolite.engine.job import JobLauncher, RunAborted, RunningJob
from pytest_theodolite.engine.recorder import RepetitionRecorder, RepetitionSamples
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.infra.spark.executors import driver_jvm_pid, executor_addresses, unanswered
from pytest_theodolite.store.environment import environment_info
from pytest_theodolite.store.results import ResultsWriter
from theodolite_generator import Workload

# How often a running measurement asks its executors whether they answer (infra/spark/executors.unanswered):
# Spark notices a silent host only after 60-120 s, by then a stalled query has read as a growing lag.
ANSWER_PROBE_INTERVAL_S = 5.0


@dataclass(frozen=True)
class PhaseTimings:
    """Wall time of one repetition's phases (where a sub-experiment's time goes, for the progress line)."""

    setup_s: float = 0.0  # topics, session with r registered executors, query start, generator start
    warmup_s: float = 0.0  # priming without the CPU limit included
    measurement_s: float = 0.0
    teardown_s: float = 0.0

    def as_counters(self) -> dict[str, int]:
        return {f"{name.removesuffix('_s')}_ms": round(value * 1000) for name, value in vars(self).items()}


@dataclass
class ExperimentRunner:
    benchmark: Benchmark
    settings: ExperimentSettings
    kafka: KafkaCluster
    spark: SparkCluster
    writer: ResultsWriter
    generator_client_config: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: called with every finished sub-experiment (progress output in the plugin)
    on_sub_experiment: Callable[[SubExperimentRecord], None] | None = None
    timings: dict[tuple[int, int, int], PhaseTimings] = field(default_factory=dict, init=False)
    records: dict[tuple[int, int], SubExperimentRecord] = field(default_factory=dict, init=False)
    #: the share of each load's rate the generator sends (judge.comparison.offered_share); the keys stay
    offered_share: float = field(default=1.0, init=False)
    #: starts and stops each run of the job (engine/job.py)
    jobs: JobLauncher = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.jobs = JobLauncher(
            self.benchmark, self.settings, self.kafka, self.spark, self.generator_client_config
        )

    def offer(self, share: float) -> None:
        """Send each load at `share` of its rate from now on; refused once a sub-experiment ran at another."""
        if share != self.offered_share and self.records:
            raise ValueError(
                f"{self.benchmark.name}: its loads ran at {self.offered_share:.2f}x their rates already, and "
                f"cannot be offered at {share:.2f}x in the same session; give each baseline its own benchmark name"
            )
        self.offered_share = share

    def workload(self, load: int) -> Workload:
        """What the generator sends for `load`: the benchmark's workload at the offered share of its rate."""
        workload = self.benchmark.workload(load)
        return workload if self.offered_share == 1 else workload.sent_faster(self.offered_share)

    # -- metrics ---------------------------------------------------------------------------------------
    def measure_demand(self, *, stop_on_unmeasured: bool = False) -> DemandResult:
        result = search_demand(
            self.run_sub_experiment,
            self.settings.loads,
            self.settings.resources,
            self.settings.strategy,
            lower_bound=self.settings.lower_bound,
            stop_on_unmeasured=stop_on_unmeasured,
        )
        self.writer.write_demand(result)
        return result

    # -- one sub-experiment ----------------------------------------------------------------------------
    def run_sub_experiment(self, load: int, resources: int) -> SubExperimentRecord:
        """Run (load, resources) at the offered share of the load's rate, its bounds in seconds stretched by that
        share (SloSettings.dilated)."""
        workload = self.workload(load)
        repetitions = [
            self.run_repetition(
                load, resources, rep, workload, share=self.offered_share, bounds_share=self.offered_share
            )
            for rep in range(self.settings.repetitions)
        ]
        return self._finish_sub_experiment(load, resources, workload.target_rate, repetitions)

    def confirm_sub_experiment(
        self, load: int, resources: int, *, share: float | None = None
    ) -> SubExperimentRecord:
        """One more repetition of a finished sub-experiment, combined with its earlier ones (the median slope
        decides; repetitions that disagree make the record uncertain: certainty.to_confirm) -- at `share` of
        the load's rate where given (comparison.regression_share; each repetition records its rate), there to
        show a regression; its bounds in seconds stretched by the share it runs at (SloSettings.dilated)."""
        earlier = self.records[(load, resources)]
        workload = self.workload(load) if share is None else self.benchmark.workload(load).sent_faster(share)
        repetition = self.run_repetition(
            load,
            resources,
            len(earlier.repetitions),
            workload,
            share=self.offered_share if share is None else share,
            bounds_share=self.offered_share if share is None else share,
        )
        return self._finish_sub_experiment(
            load, resources, earlier.target_rate, [*earlier.repetitions, repetition]
        )

    def _finish_sub_experiment(
        self, load: int, resources: int, target_rate: float | None, repetitions: Sequence[RepetitionRecord]
    ) -> SubExperimentRecord:
        record = SubExperimentRecord.from_repetitions(load, resources, target_rate, repetitions)
        self.writer.record_sub_experiment(record)
        self.records[(load, resources)] = record
        if self.on_sub_experiment is not None:
            self.on_sub_experiment(record)
        return record

    def run_repetition(
        self,
        load: int,
        resources: int,
        repetition: int,
        workload: Workload,
        *,
        share: float = 1.0,
        bounds_share: float = 1.0,
    ) -> RepetitionRecord:
        """One run of the job against `workload`, offered at `share` of the load's rate; the SLOs' bounds in
        seconds stretched by `bounds_share` (SloSettings.dilated)."""
        slo = self.settings.slo.dilated(bounds_share)
        job = self.jobs.new_job()
        plan = self.settings.measurement_plan
        protocol = MeasurementProtocol(
            plan,
            self.settings.slo.lag_trend_threshold.for_load(workload.target_rate),
            method=self.settings.slo.slope_method,
            confidence=self.settings.slo.confidence,
            offered_rate=workload.target_rate,
            max_batch_s=slo.max_batch_duration_s,
        )
        phases: dict[str, float] = {}
        abort: RunAborted | None = None
        t_start = time.monotonic()
        with RepetitionRecorder(
            self.writer, load, resources, repetition, instance_groups=len(self.spark.instance_groups)
        ) as recorder:
            try:
                # primed without the CPU limit: the runner applies it when the protocol's priming ends
                with self.jobs.running_job(
                    job,
                    load,
                    resources,
                    workload,
                    # primed unlimited only where the limit can be set inside the session (not: Kubernetes pods)
                    instance_cpu=None
                    if plan.prime_unlimited and self.spark.can_limit_cpu
                    else self.settings.instance_cpu,
                ):
                    phases["setup_s"] = time.monotonic() - t_start
                    assert job.spark is not None and job.query is not None and job.generator is not None
                    host = HostSampler(
                        self.spark,
                        self.kafka.local_pids,
                        job.generator.worker_pids,
                        driver_jvm_pid(job.spark),
                    )
                    phases.update(self._sample(job, resources, protocol, recorder, host))
            except RunAborted as exc:
                abort = exc
            if (lost := job.lost_records()) is not None:  # said also where the run broke off before
                abort = RunAborted(Outcome.ERRORED, lost if abort is None else f"{abort.reason}; and {lost}")
            late_rows = recorder.late_rows(job.late_rows)  # per micro-batch, of a job with stateful operators
            generator_rate = (
                None if job.generator is None else recorder.generator_rates(job.generator.achieved_rates())
            )
        sampled = recorder.samples
        phases["teardown_s"] = time.monotonic() - (job.teardown_started or t_start)
        timings = PhaseTimings(**phases)
        self.timings[(load, resources, repetition)] = timings
        counters = dict(job.counters)
        counters.update(timings.as_counters())
        counters.update(sampled.cost_counters())
        usage = sampled.host_usage(self.quota_cores(resources), self.quota_cores(1))
        verdicts = self._verdicts(
            slo, abort, protocol, sampled, workload.target_rate, generator_rate, counters, late_rows, usage
        )
        summary = protocol.summary()
        if share != 1:  # analyse judges it so again: at its rate, with its bounds
            summary["offered_share"] = share
            summary["bounds_share"] = bounds_share
        if (slow := SlowSampling.of(sampled.lag_t, self.settings.sample_interval_s)) is not None:
            summary["sampling"] = slow.to_dict()
        if usage is not None:  # for the report; analyse judges the host series again from its cores and quota
            summary["host"] = usage.to_dict()
        return RepetitionRecord(repetition, verdicts, counters, summary, sampled.cost())

    def quota_cores(self, resources: int) -> float | None:
        """The instances' CPU quota while measured, in cores; None where they are not limited."""
        if self.settings.instance_cpu is None or not self.spark.can_limit_cpu:
            return None
        return self.settings.instance_cpu * resources

    def _sample(
        self,
        job: RunningJob,
        resources: int,
        protocol: MeasurementProtocol,
        recorder: RepetitionRecorder,
        host: HostSampler,
    ) -> dict[str, float]:
        """Sample on a clock until the protocol is done, each sample handed to `recorder`; raises RunAborted
        when the run cannot be judged."""
        spark, query = job.spark, job.query
        sampler = monitor.LagSampler(
            self.kafka.client_kwargs(), job.topics["input"], self.benchmark.input_partitions
        )
        plan, interval = protocol.plan, self.settings.sample_interval_s
        # the protocol ends by itself; this bound only guards against a clock that stops advancing
        deadline = time.monotonic() + plan.longest_s + 60
        started = time.monotonic()
        next_tick = started
        limited = not plan.prime_unlimited
        executors_at_start = executor_addresses(spark)  # the session waited for all of them
        # asked again every few seconds and when the measurement ends; where this host cannot reach an
        # executor (a Kubernetes pod network) it is not asked
        answering = executors_at_start - unanswered(executors_at_start).keys()
        next_probe = started + ANSWER_PROBE_INTERVAL_S
        try:
            while True:
                self._check_running(query, spark, executors_at_start, resources)
                if time.monotonic() >= next_probe:
                    self._check_answering(answering)
                    next_probe = time.monotonic() + ANSWER_PROBE_INTERVAL_S
                sample = self._lag_sample(sampler, query)
                recorder.lag_sample(sample)
                phase = protocol.feed(
                    sample.timestamp_s,
                    sample.lag,
                    sample.batch_id,
                    sample.finished_batch_ms,
                    sample.batch_end_s,
                )
                if not limited and phase is not Phase.PRIMING:
                    self.spark.limit_instances(self.settings.instance_cpu)
                    limited = True
                if limited:
                    cpu = self.spark.instance_cpu_seconds()
                    if cpu is not None:
                        recorder.cost_sample(sample.timestamp_s, cpu, sample.end_offset)
                    # the host too: a FAIL decided while settling is judged on it
                    recorder.host_sample(sample.timestamp_s, host.sample(), host.cores)
                if phase is Phase.DONE:
                    self._check_answering(answering)
                    break
                if time.monotonic() > deadline:
                    raise RunAborted(Outcome.ERRORED, "the measurement outlasted every bound of its protocol")
                next_tick += interval
                time.sleep(max(0.0, next_tick - time.monotonic()))
        finally:
            sampler.close()
            recorder.measured_from(protocol.measure_from_s)
        elapsed = time.monotonic() - started
        warmup = protocol.warmup_used_s if protocol.warmup_used_s is not None else elapsed
        return {"warmup_s": warmup, "measurement_s": max(0.0, elapsed - warmup)}

    @staticmethod
    def _check_running(query: Any, spark: Any, executors_at_start: frozenset[str], resources: int) -> None:
        """Raise RunAborted (ERRORED) where the query stopped or an executor was lost."""
        if not query.isActive:
            exc = query.exception()
            raise RunAborted(
                Outcome.ERRORED,
                f"the query stopped: {str(exc).splitlines()[0] if exc else 'no error'}",
            )
        if lost := executors_at_start - (now_registered := executor_addresses(spark)):
            raise RunAborted(
                Outcome.ERRORED,
                f"an executor was lost ({', '.join(sorted(lost))}): "
                f"{len(now_registered) - 1} of {resources} registered now",
            )

    @staticmethod
    def _check_answering(answering: frozenset[str]) -> None:
        """Raise RunAborted (ERRORED) where an executor that answered when the measurement began answers no
        more: a stalled query on a silent host is no verdict on the job."""
        if not (gone := unanswered(answering)):
            return
        silent = sorted(a for a, why in gone.items() if why == "silent")
        if silent:
            raise RunAborted(
                Outcome.ERRORED,
                f"an executor stopped answering ({', '.join(silent)}): its host or its network link went silent "
                "while it was measured (its processes may still run)",
            )
        raise RunAborted(  # before Spark noticed: the same words as _check_running's
            Outcome.ERRORED, f"an executor was lost ({', '.join(sorted(gone))}): it refuses connections"
        )

    @staticmethod
    def _lag_sample(sampler: monitor.LagSampler, query: Any) -> monitor.LagSample:
        """One sample of the lag and the query's progress; RunAborted (ERRORED) where either cannot be read."""
        try:
            return sampler.sample(query)
        except monitor.ProgressError as exc:
            raise RunAborted(Outcome.ERRORED, f"the query's progress could not be read: {exc}") from None
        except Exception as exc:  # whatever kafka-python raises, the broker is gone
            raise RunAborted(Outcome.ERRORED, f"the broker did not answer: {exc!r}") from None

    def _verdicts(
        self,
        slo: SloSettings,
        abort: RunAborted | None,
        protocol: MeasurementProtocol,
        sampled: RepetitionSamples,
        target_rate: float,
        generator_rate: TimeSeries | None,
        counters: Mapping[str, int],
        late_rows: TimeSeries | None,
        host_usage: HostUsage | None = None,
    ) -> tuple[SloVerdict, ...]:
        if abort is not None:
            return (SloVerdict(LAG_TREND, abort.outcome, float("nan"), float("nan"), abort.reason),)
        return evaluate_repetition(
            slo,
            lag=sampled.lag_series,
            target_rate=target_rate,
            generator_rate=generator_rate,
            batch_duration=sampled.batch_durations,
            batch_ids=sampled.batch_ids,
            batch_ends=sampled.batch_ends,
            warmup_s=protocol.warmup_used_s,
            not_settled=protocol.failure_reason,
            beyond_batch_bound=protocol.failure_reason if protocol.stop is Stop.BEYOND_BATCH_BOUND else None,
            records_total=counters.get("records_total"),
            records_malformed=counters.get("records_malformed"),
            late_rows=late_rows,
            host_usage=host_usage,
        )


def new_writer(
    results_dir: Path,
    experiment_id: str,
    benchmark: Benchmark,
    settings: ExperimentSettings,
    metric: Metric,
    testbed: Mapping[str, Any],
    source_dir: Path | None = None,
) -> ResultsWriter:
    """`source_dir`: where the measured job's checkout lies (REF's worktree in pull-request mode), whose git
    revision the results record; by default the working directory."""
    return ResultsWriter(
        results_dir,
        experiment_id,
        metric=metric,
        slo_settings=settings.slo,
        settings=experiment_settings_dict(benchmark, settings, testbed),
        loads=settings.loads,
        resources=settings.resources,
        environment=environment_info(source_dir),
    )


__all__: Sequence[str] = (
    "Benchmark",
    "ExperimentRunner",
    "ExperimentSettings",
    "PhaseTimings",
    "RunAborted",
    "RunningJob",
    "new_writer",
)
