"""One run of the job on the cluster: its topics, checkpoint, Spark session, query and load generator.

`JobLauncher.running_job` starts them in order and, whatever happens, stops them in reverse (generator, query,
session, topics, checkpoint); what the query and the generator counted is kept in the `RunningJob`. Sampling
and judging a run is the runner's (engine/runner.py); this module only starts and stops it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_theodolite.core.errors import TheodoliteLeakWarning
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.engine import monitor
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark import shipping
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.infra.waiting import poll_until, wait_until
from theodolite_generator import LoadGenerator, Workload, WorkloadError

#: what a job with pandas UDFs needs beyond the plugin's own dependencies
PANDAS_UDF_EXTRA = "a job with pandas UDFs needs pyarrow: pip install 'pytest-theodolite[pandas-udf]'"

RECORDS_METRIC = "records"  # the observation the bundled jobs publish (spark_jobs.common.RECORDS_METRIC)


class RunAborted(Exception):
    """Ends a run of the job early with an ERRORED or INVALID verdict."""

    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason


@contextmanager
def generator_refusal() -> Iterator[None]:
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
class JobLauncher:
    """Starts and stops runs of one benchmark's job on one Kafka and one Spark cluster."""

    benchmark: Benchmark
    settings: ExperimentSettings
    kafka: KafkaCluster
    spark: SparkCluster
    generator_client_config: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: the ids in the names of every topic this launcher created (``theodolite-<id>-input`` ...)
    run_ids: list[str] = field(default_factory=list, init=False)

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
                with generator_refusal():
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
                        with generator_refusal():
                            job.generator.release()
                        yield job
                    finally:
                        job.teardown_started = time.monotonic()
                        self._stop_generator(job)
                        if job.query is not None:
                            stopped, job.late_rows = self.stop_query(job.query)
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
            first_line = str(exc).splitlines()[0] if str(exc) else ""
            hint = f" ({PANDAS_UDF_EXTRA})" if "pyarrow" in first_line.lower() else ""
            raise RunAborted(
                Outcome.ERRORED, f"the job did not start: {type(exc).__name__}: {first_line}{hint}"
            ) from None

    def restart_query(self, job: RunningJob, query_options: Mapping[str, Any]) -> None:
        """Stop the running job's query and start it again from its checkpoint with `query_options` changed
        (e.g. another micro-batch cap): the same session, topics and generator, the input read on from where
        the query stopped."""
        if job.query is not None:
            self.stop_query(job.query)
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
    def stop_query(query) -> tuple[dict[str, int], list[tuple[float, int]]]:
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


__all__ = ("JobLauncher", "RunAborted", "RunningJob", "generator_refusal", "remove_scratch")
