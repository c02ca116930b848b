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

import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator import LoadGenerator, Workload, WorkloadError
from pytest_theodolite.core.contention import (
    SERIES_LIMITED_INSTANCE_CPU,
    HostUsage,
    SlowSampling,
    host_usage,
    instance_series,
)
from pytest_theodolite.core.cost import SERIES_INPUT_RECORDS, SERIES_INSTANCE_CPU, cost_estimate
from pytest_theodolite.core.errors import TheodoliteLeakWarning
from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.evaluation import SloSettings, evaluate_repetition
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.protocol import MeasurementProtocol, Phase, Stop
from pytest_theodolite.core.records import (
    SERIES_BATCH_END,
    SERIES_BATCH_ID,
    SERIES_LATE_ROWS,
    SERIES_STATE_ROWS,
    RepetitionRecord,
    SubExperimentRecord,
)
from pytest_theodolite.core.scalability import DemandResult, Metric
from pytest_theodolite.core.search import search_demand
from pytest_theodolite.core.slo import GENERATOR_RATE, LAG_TREND, SloVerdict
from pytest_theodolite.engine import monitor
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings, experiment_settings_dict
from pytest_theodolite.engine.host_sampler import HOST_SERIES, HostSampler
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark import shipping
from pytest_theodolite.infra.spark.cluster import SparkCluster, driver_jvm_pid, executor_addresses
from pytest_theodolite.infra.waiting import poll_until, wait_until
from pytest_theodolite.store.results import ResultsWriter, environment_info

RECORDS_METRIC = "records"  # the observation the bundled jobs publish (spark_jobs.common.RECORDS_METRIC)


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
class _Sampled:
    """What one repetition's monitor sampled, kept for the verdicts (the same rows go to the raw files)."""

    lag_t: list[float] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)
    batch_t: list[float] = field(default_factory=list)
    batch_ms: list[float] = field(default_factory=list)
    ids_t: list[float] = field(default_factory=list)
    ids: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    #: from the CPU limit on: (time, instance CPU seconds, input records so far) at every sample; the figure
    #: is taken from the measurement's start, which may lie among the settling batches (measure_settled_batches)
    cost_samples: list[tuple[float, float, int]] = field(default_factory=list)
    measured_from_s: float | None = None
    #: from the CPU limit on: the host's cumulative CPU series (engine/host_sampler.py), and its cores
    host_series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    host_cores: int | None = None

    def host_usage(self, quota_cores: float | None, instance_quota_cores: float | None) -> HostUsage | None:
        """Where the host's CPU went over the measurement (core/contention.py); None where not read."""
        if self.host_cores is None:
            return None
        series = {
            name: TimeSeries.of([t for t, _ in s], [v for _, v in s]) for name, s in self.host_series.items()
        }
        instance_cpu = series.get(SERIES_LIMITED_INSTANCE_CPU)
        return host_usage(
            series,
            instance_cpu=instance_cpu,
            host_cores=self.host_cores,
            quota_cores=quota_cores,
            instance_quota_cores=instance_quota_cores,
        )

    def cost_counters(self) -> dict[str, int]:
        """What the instances spent on the records offered while measuring (the continuous cost figure):
        ``instance_cpu_ms`` over ``records_measured`` in ``cost_window_ms``; empty where the CPU could not be
        read."""
        measured = self.measured_cost_samples()
        if len(measured) < 2 or measured[-1][2] <= measured[0][2]:
            return {}
        (t0, cpu0, records0), (t1, cpu1, records1) = measured[0], measured[-1]
        return {
            "instance_cpu_ms": round((cpu1 - cpu0) * 1000),
            "records_measured": records1 - records0,
            "cost_window_ms": round((t1 - t0) * 1000),
        }

    def measured_cost_samples(self) -> list[tuple[float, float, int]]:
        """The cost samples from the measurement's start on; none where it never started."""
        if self.measured_from_s is None:
            return []
        return [sample for sample in self.cost_samples if sample[0] >= self.measured_from_s]

    def cost(self) -> dict[str, Any]:
        """The cost figure with its interval (cost.CostEstimate); empty where the CPU could not be read."""
        times, cpu, records = ([sample[i] for sample in self.measured_cost_samples()] for i in range(3))
        estimate = cost_estimate(times, cpu, records)
        return {} if estimate is None else estimate.to_dict()

    def add(self, sample: monitor.LagSample) -> None:
        self.lag_t.append(sample.timestamp_s)
        self.lag.append(sample.lag)
        if sample.batch_duration_ms is not None:
            self.batch_t.append(sample.timestamp_s)
            self.batch_ms.append(sample.batch_duration_ms)
        if sample.batch_id is not None:
            self.ids_t.append(sample.timestamp_s)
            self.ids.append(sample.batch_id)
            self.ends.append(float("nan") if sample.batch_end_s is None else sample.batch_end_s)


class RunAborted(Exception):
    """Ends a run of the job early with an ERRORED or INVALID verdict."""

    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason


@contextmanager
def _generator_refusal() -> Iterator[None]:
    """A generator that refuses the load (or whose workers cannot start) makes the run INVALID."""
    try:
        yield
    except WorkloadError as exc:
        raise RunAborted(Outcome.INVALID, f"the generator refused the load: {exc}") from None


@dataclass
class RunningJob:
    """One run of the job (a repetition, or a capacity measurement): its names, what runs, and what its query
    reported when it stopped."""

    run_id: str
    topics: dict[str, str]
    spark: Any = None
    query: Any = None
    generator: LoadGenerator | None = None
    counters: dict[str, int] = field(default_factory=dict)
    late_rows: list[tuple[float, int]] = field(default_factory=list)
    teardown_started: float | None = None  # time.monotonic() when the teardown began
    checkpoint: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # the job's keyword options besides the topics

    def lost_records(self) -> str | None:
        """Why the input topic holds fewer records than the broker acknowledged to the generator (a replica
        that lost acknowledged writes, e.g. a broker killed with a replication the topic's min.insync.replicas
        did not protect), or None -- also where either count could not be read."""
        acknowledged = self.counters.get("records_acknowledged")
        in_topic = self.counters.get("records_in_input_topic")
        if acknowledged is None or in_topic is None or in_topic >= acknowledged:
            return None
        return (
            f"the input topic holds {in_topic} records, but the broker acknowledged {acknowledged} to the "
            f"generator: {acknowledged - in_topic} acknowledged records were lost"
        )


#: how long a run's teardown keeps removing its scratch directory while an executor still writes into it
SCRATCH_REMOVAL_WAIT_S = 5.0


def remove_scratch(path: Path, *, timeout_s: float = SCRATCH_REMOVAL_WAIT_S) -> bool:
    """Remove a run's scratch directory; True once a pass left nothing. An executor of the stopped session may
    still be renaming a state-store file into the checkpoint (docs/lab-notes/gates.md, 2026-12-05), and a pass
    that listed the directory before leaves that file: the removal is repeated, and a directory that stays is
    named in a warning (the verdict is left as measured). A write after the last pass lands in the cluster's
    `scratch_dir`, removed once its executors are gone."""

    def removed() -> bool:
        shutil.rmtree(path, ignore_errors=True)
        return not path.exists()

    gone, _ = poll_until(removed, timeout_s=timeout_s, interval_s=0.2)
    if not gone:
        warnings.warn(
            TheodoliteLeakWarning(
                f"the run's scratch directory {path} could not be removed within {timeout_s:g} s of its "
                "session's end (an executor still writing into it, or a file this process may not delete) and "
                "is left; delete it by hand"
            ),
            stacklevel=2,
        )
    return bool(gone)


#: how long a repetition's teardown waits for the cluster to count the input topic's records: a replicated
#: cluster that lost a broker elects new partition leaders within its broker session timeout (9 s by default)
RECORDS_COUNT_WAIT_S = 30.0


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
    #: the ids in the names of every topic this runner created (``theodolite-<id>-input`` ...)
    run_ids: list[str] = field(default_factory=list, init=False)
    #: the share of each load's rate the generator sends (judge.comparison.offered_share); the keys stay
    offered_share: float = field(default=1.0, init=False)

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

    @contextmanager
    def running_job(
        self,
        job: RunningJob,
        load: int,
        resources: int,
        workload: Workload,
        *,
        instance_cpu: float | None,
        query_options: Mapping[str, Any] | None = None,
        spark_conf: Mapping[str, str] | None = None,
        lock: bool = True,
    ) -> Iterator[RunningJob]:
        """The job running against `workload` on `resources` instances, on fresh topics and a fresh checkpoint:
        topics created, the generator's workers spawned (a UC4 registry published), a session with exactly that
        many executors (the gate's Spark settings and `spark_conf`), the query started, then the generator
        released (``lock=False``: the caller holds the cluster's session lock, SparkCluster.session).
        On exit, whatever happened, the reverse: generator, query (its counters and late rows kept in `job`),
        session, topics, checkpoint. Raises `RunAborted` where the job does not start (ERRORED) or the
        generator refuses the load (INVALID)."""
        # where the executors share this machine: a temporary directory; else under the cluster's root
        root = self.spark.checkpoint_root
        if self.spark.scratch_dir is not None:
            self.spark.scratch_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(
            tempfile.mkdtemp(prefix=f"theodolite-checkpoint-{job.run_id}-", dir=self.spark.scratch_dir)
        )
        checkpoint = (
            str(scratch)
            if root is None
            else shipping.checkpoint_location(root, f"{self.kafka.topic_prefix}{job.run_id}-checkpoint")
        )
        broke_off = False
        try:
            for name in job.topics.values():
                self.kafka.create_gate_topic(name, self.benchmark.input_partitions)
            job_module = self.benchmark.start_query.__module__
            conf = {**self.settings.spark_conf, **(spark_conf or {})}
            if self.spark.kind.started_here:
                py_files = []
                # the executors run this Python but not this process's path (pull-request mode sets its own)
                executor_path = shipping.executor_python_path([job_module, __name__], os.environ)
                if executor_path:
                    conf.setdefault(shipping.EXECUTOR_PYTHONPATH, executor_path)
            else:
                py_files = [shipping.job_archive(job_module, scratch)]
            # the generator's workers start (interpreters, connections) while the application does, and send
            # once the query runs: 0.4-1.2 s less a set-up (docs/lab-notes/protocol.md, 2026-12-04, late)
            job.generator = LoadGenerator(
                self.kafka.bootstrap_servers,
                job.topics["input"],
                workload,
                client_config=self.generator_client_config,
                config_topic=job.topics.get(self.benchmark.registry_topic_option or ""),
            )
            try:
                with _generator_refusal():
                    job.generator.spawn()
                with self.spark.session(
                    instances=resources,
                    conf=conf,
                    instance_cpu=instance_cpu,
                    app_name=f"theodolite-{self.benchmark.name}-{load}-{resources}",
                    py_files=py_files,
                    lock=lock,
                ) as spark:
                    job.spark = spark
                    try:
                        job.checkpoint, job.options = checkpoint, self.job_options(job.topics, query_options)
                        self._start_query(job)
                        with _generator_refusal():
                            job.generator.release()
                        yield job
                    finally:
                        job.teardown_started = time.monotonic()
                        self._stop_generator(job)
                        if job.query is not None:
                            stopped, job.late_rows = self._stop_query(job.query)
                            job.counters.update(stopped)
                        self._delete_checkpoint(spark, checkpoint)
            finally:
                self._stop_generator(job)  # a session that did not start: its spawned workers, still waiting
        except BaseException:
            broke_off = True
            raise
        finally:
            # a run that broke off may have lost its broker, and each request to a dead one would only wait out
            # its timeout: it is asked only where it still takes a connection (a run that ended asks at once,
            # sparing a secured listener a bare connection per run)
            if broke_off and not self.kafka.accepts_connections():
                self._warn_topics_left(
                    list(job.topics.values()), load, resources, "no bootstrap address accepts connections"
                )
            else:
                if "records_acknowledged" in job.counters:
                    in_topic = self._records_in(job.topics["input"])
                    if in_topic is not None:
                        job.counters["records_in_input_topic"] = in_topic
                self._delete_topics(job.topics.values(), load, resources)
            remove_scratch(scratch)

    @staticmethod
    def _stop_generator(job: RunningJob) -> None:
        """Stop the job's generator once (a second call finds it stopped) and keep what it acknowledged."""
        if job.generator is not None and "records_acknowledged" not in job.counters:
            job.generator.stop()
            job.counters["records_acknowledged"] = job.generator.totals.acknowledged

    def job_options(
        self, topics: Mapping[str, str], query_options: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The keywords the job gets besides the topics and the checkpoint: every one of the job contract on
        every run (core/job_contract.py; a job that forgot one fails locally too, not first on a secured
        cluster) -- no micro-batch cap and no client settings unless the benchmark's job options, the cluster
        (its client properties win) or this run (`query_options`, e.g. a capacity measurement's cap) give them."""
        options = {
            "kafka_options": {},
            "max_offsets_per_trigger": None,
            **self.benchmark.job_options,
            **{option: topics[option] for option in self.benchmark.extra_topics},
            **(query_options or {}),
        }
        if self.kafka.properties:
            options["kafka_options"] = {
                k: v for k, v in self.kafka.spark_options().items() if k != "kafka.bootstrap.servers"
            }
        return options

    def _records_in(self, topic: str) -> int | None:
        """The records in `topic` now; None where the cluster does not say within RECORDS_COUNT_WAIT_S (a
        replicated cluster that lost a broker answers again once its partitions have new leaders)."""
        try:
            (count,) = wait_until(
                lambda: (self.kafka.records_in(topic),),  # a 1-tuple: a count of 0 is an answer too
                timeout_s=RECORDS_COUNT_WAIT_S,
                interval_s=1.0,
                transient=(Exception,),
                what=f"the end offsets of {topic}",
            )
            return count
        except Exception:  # no answer: a broker gone has made the run ERRORED already
            return None

    def _delete_checkpoint(self, spark: Any, checkpoint: str) -> None:
        """A checkpoint under the cluster's root, deleted while the session can still reach it; one that cannot
        be is named in a warning (it would pile up), the verdict left as measured."""
        if self.spark.checkpoint_root is None:
            return  # the scratch directory, removed with it
        try:
            if shipping.is_local_path(checkpoint):
                shutil.rmtree(checkpoint.removeprefix("file://"), ignore_errors=False)
            else:
                shipping.delete_checkpoint(spark, checkpoint)
        except FileNotFoundError:
            pass  # the job never wrote one
        except Exception as exc:  # whatever the file system raises, the checkpoint is left
            warnings.warn(
                TheodoliteLeakWarning(
                    f"{self.benchmark.name}: the checkpoint {checkpoint} could not be deleted "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); delete it by hand"
                ),
                stacklevel=2,
            )

    def _start_query(self, job: RunningJob) -> None:
        try:
            job.query = self.benchmark.start_query(
                job.spark,
                bootstrap_servers=self.kafka.bootstrap_servers,
                input_topic=job.topics["input"],
                output_topic=job.topics["output"],
                checkpoint_dir=job.checkpoint,
                **job.options,
            )
        except Exception as exc:  # the job's own error, reported in the verdict
            raise RunAborted(
                Outcome.ERRORED,
                f"the job did not start: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            ) from None

    def restart_query(self, job: RunningJob, query_options: Mapping[str, Any]) -> None:
        """Stop the running job's query and start it again from its checkpoint with `query_options` changed
        (e.g. another micro-batch cap): the same session, topics and generator, the input read on from where
        the query stopped."""
        if job.query is not None:
            self._stop_query(job.query)
            job.query = None
        job.options = {**job.options, **query_options}
        self._start_query(job)

    def new_job(self) -> RunningJob:
        """A job's fresh names: ``theodolite-<id>-input``, ``-output`` and the benchmark's extra topics."""
        run_id = uuid.uuid4().hex[:8]
        self.run_ids.append(run_id)
        topics = {role: self.kafka.gate_topic_name(run_id, role) for role in ("input", "output")}
        topics.update(
            {
                option: self.kafka.gate_topic_name(run_id, option.replace("_", "-"))
                for option in self.benchmark.extra_topics
            }
        )
        return RunningJob(run_id, topics)

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
        job = self.new_job()
        lag_writer = self.writer.open_series(load, resources, LAG_TREND, repetition)
        series_writers = {
            name: self.writer.open_series(load, resources, name, repetition)
            for name in (
                "input-rate",
                "processed-rate",
                "batch-duration",
                SERIES_BATCH_ID,
                SERIES_BATCH_END,
                SERIES_INSTANCE_CPU,
                SERIES_INPUT_RECORDS,
            )
        }
        # a stateless job has no state, a broker in a container no local process: such files are created at
        # their first value only
        each_instance = [instance_series(i) for i in range(len(self.spark.instance_groups))]
        for name in (SERIES_STATE_ROWS, *HOST_SERIES, *each_instance):
            series_writers[name] = self.writer.open_series(load, resources, name, repetition, lazy=True)
        plan = self.settings.measurement_plan
        protocol = MeasurementProtocol(
            plan,
            self.settings.slo.lag_trend_threshold.for_load(workload.target_rate),
            method=self.settings.slo.slope_method,
            confidence=self.settings.slo.confidence,
            offered_rate=workload.target_rate,
            max_batch_s=slo.max_batch_duration_s,
        )
        sampled = _Sampled()
        phases: dict[str, float] = {}
        late_rows: TimeSeries | None = None  # per micro-batch, of a job with stateful operators
        abort: RunAborted | None = None
        t_start = time.monotonic()
        try:
            # primed without the CPU limit: the runner applies it when the protocol's priming ends
            with self.running_job(
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
                    self.spark, self.kafka.local_pids, job.generator.worker_pids, driver_jvm_pid(job.spark)
                )
                phases.update(
                    self._sample(
                        job.spark,
                        job.query,
                        resources,
                        job.topics["input"],
                        protocol,
                        lag_writer,
                        series_writers,
                        sampled,
                        host,
                    )
                )
        except RunAborted as exc:
            abort = exc
        finally:
            lag_writer.close()
            for writer in series_writers.values():
                writer.close()
        if abort is None and (lost := job.lost_records()) is not None:
            abort = RunAborted(Outcome.ERRORED, lost)
        if job.late_rows:
            late_rows = TimeSeries.of([t for t, _ in job.late_rows], [n for _, n in job.late_rows])
            self.writer.write_series(load, resources, SERIES_LATE_ROWS, repetition, late_rows)
        phases["teardown_s"] = time.monotonic() - (job.teardown_started or t_start)
        timings = PhaseTimings(**phases)
        self.timings[(load, resources, repetition)] = timings
        counters = dict(job.counters)
        counters.update(timings.as_counters())
        counters.update(sampled.cost_counters())

        generator_series = None
        if job.generator is not None:
            rates = job.generator.achieved_rates()
            generator_series = TimeSeries.of([s.epoch_s for s in rates], [s.records_per_s for s in rates])
            self.writer.write_series(load, resources, GENERATOR_RATE, repetition, generator_series)
        usage = sampled.host_usage(self.quota_cores(resources), self.quota_cores(1))
        verdicts = self._verdicts(
            slo, abort, protocol, sampled, workload.target_rate, generator_series, counters, late_rows, usage
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
        spark,
        query,
        resources,
        input_topic,
        protocol: MeasurementProtocol,
        lag_writer,
        series_writers,
        sampled: _Sampled,
        host: HostSampler,
    ) -> dict[str, float]:
        """Sample on a clock until the protocol is done; raises RunAborted when the run cannot be judged."""
        sampler = monitor.LagSampler(self.kafka.client_kwargs(), input_topic, self.benchmark.input_partitions)
        plan, interval = protocol.plan, self.settings.sample_interval_s
        # the protocol ends by itself; this bound only guards against a clock that stops advancing
        deadline = time.monotonic() + plan.longest_s + 60
        started = time.monotonic()
        next_tick = started
        limited = not plan.prime_unlimited
        executors_at_start = executor_addresses(spark)  # the session waited for all of them
        try:
            while True:
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
                try:
                    sample = sampler.sample(query)
                except monitor.ProgressError as exc:
                    raise RunAborted(
                        Outcome.ERRORED, f"the query's progress could not be read: {exc}"
                    ) from None
                except Exception as exc:  # whatever kafka-python raises, the broker is gone
                    raise RunAborted(Outcome.ERRORED, f"the broker did not answer: {exc!r}") from None
                sampled.add(sample)
                lag_writer.append(sample.timestamp_s, sample.lag)
                for name, value in (
                    ("input-rate", sample.input_rows_per_s),
                    ("processed-rate", sample.processed_rows_per_s),
                    ("batch-duration", sample.batch_duration_ms),
                    (SERIES_BATCH_ID, sample.batch_id),
                    (SERIES_BATCH_END, sample.batch_end_s),
                    (SERIES_STATE_ROWS, sample.state_rows),
                ):
                    if value is not None:
                        series_writers[name].append(sample.timestamp_s, value)
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
                        # the records the generator wrote to the input topic: smooth, unlike the processed
                        # offsets, which move by whole micro-batches
                        sampled.cost_samples.append((sample.timestamp_s, cpu, sample.end_offset))
                        series_writers[SERIES_INSTANCE_CPU].append(sample.timestamp_s, cpu)
                        series_writers[SERIES_INPUT_RECORDS].append(sample.timestamp_s, sample.end_offset)
                    # the host too: a FAIL decided while settling is judged on it
                    for name, value in host.sample().items():
                        sampled.host_series.setdefault(name, []).append((sample.timestamp_s, value))
                        series_writers[name].append(sample.timestamp_s, value)
                    sampled.host_cores = host.cores
                if phase is Phase.DONE:
                    break
                if time.monotonic() > deadline:
                    raise RunAborted(Outcome.ERRORED, "the measurement outlasted every bound of its protocol")
                next_tick += interval
                time.sleep(max(0.0, next_tick - time.monotonic()))
        finally:
            sampler.close()
            sampled.measured_from_s = protocol.measure_from_s
        elapsed = time.monotonic() - started
        warmup = protocol.warmup_used_s if protocol.warmup_used_s is not None else elapsed
        return {"warmup_s": warmup, "measurement_s": max(0.0, elapsed - warmup)}

    def _delete_topics(self, names: Iterable[str], load: int, resources: int) -> None:
        """Delete a repetition's topics (empty those that existed before it); those that cannot be are named in
        a warning (they would pile up on a real cluster), and the verdict is left as measured (a dead broker has
        already made it ERRORED)."""
        left = []
        for name in names:
            try:
                self.kafka.release_gate_topic(name)
            except Exception as exc:  # whatever the admin client raises, the topic is left
                left.append(f"{name} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        if left:
            self._warn_topics_left(left, load, resources)

    def _warn_topics_left(self, left: list[str], load: int, resources: int, why: str = "") -> None:
        warnings.warn(
            TheodoliteLeakWarning(
                f"{self.benchmark.name} load {load}, {resources} instances: {len(left)} topic(s) could not be "
                f"deleted and are left on {self.kafka.bootstrap_servers}{f' ({why})' if why else ''}: "
                f"{'; '.join(left)}. Delete them with kafka-topics.sh --bootstrap-server ADDRESS --delete "
                "--topic NAME"
            ),
            stacklevel=3,
        )

    @staticmethod
    def _stop_query(query) -> tuple[dict[str, int], list[tuple[float, int]]]:
        """Stop the query; its counters over the micro-batches Spark still keeps, and per batch the rows it
        dropped as late (monitor.late_rows_per_batch: Spark's count and the job's own)."""
        try:
            progresses = monitor.all_progress(query)
            totals = monitor.observed_totals(progresses, RECORDS_METRIC)
            written = monitor.sink_output_rows(progresses)
            late = monitor.late_rows_per_batch(progresses)
        except Exception:  # a dead query may not answer; the counts are optional
            totals, written, late = {}, None, []
        try:
            query.stop()
        except Exception:  # stopping a query that already died may raise; it is stopped either way
            pass
        counters = {f"records_{name}": value for name, value in totals.items()}
        if written is not None:
            counters["records_written"] = written
        if late:
            counters["records_dropped_late"] = sum(n for _, n in late)
        return counters, late

    def _verdicts(
        self,
        slo: SloSettings,
        abort: RunAborted | None,
        protocol: MeasurementProtocol,
        sampled: _Sampled,
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
            lag=TimeSeries.of(sampled.lag_t, sampled.lag),
            target_rate=target_rate,
            generator_rate=generator_rate,
            batch_duration=TimeSeries.of(sampled.batch_t, sampled.batch_ms),
            batch_ids=TimeSeries.of(sampled.ids_t, sampled.ids),
            batch_ends=TimeSeries.of(sampled.ids_t, sampled.ends),
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


__all__: Sequence[str] = ("Benchmark", "ExperimentRunner", "ExperimentSettings", "PhaseTimings", "new_writer")
