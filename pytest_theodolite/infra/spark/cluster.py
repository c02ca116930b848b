"""Spark clusters whose instances are real executor JVMs.

Why a plugin-managed standalone cluster by default, not ``local-cluster[...]``: only a standalone worker is
a process of our own that can be put into a CPU-limited cgroup before the executor it forks inherits it
(local-cluster's workers live inside the driver JVM). Time to r registered executors is no argument either
way: measured side by side (experiments/bench_foundation.py --only executors) it was 2.2 / 4.3 / 9.3 s
standalone vs 2.4 / 4.1 / 7.9 s local-cluster for r = 1 / 2 / 4 -- executor JVM start dominates both.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.maven import java_executable
from pytest_theodolite.infra.ports import LOOPBACK, free_port
from pytest_theodolite.infra.process import ManagedProcess
from pytest_theodolite.infra.spark import cgroups, masters
from pytest_theodolite.infra.spark.executors import (
    check_executor_python,
    registration_hint,
    wait_for_executors,
)
from pytest_theodolite.infra.spark.jars import pyspark_home
from pytest_theodolite.infra.spark.masters import ClusterAccess, MasterKind
from pytest_theodolite.infra.waiting import wait_until

EXECUTOR_MEMORY = "1g"
WORKER_MEMORY = "2g"
DRIVER_MEMORY = "2g"

#: defaults for benchmark sessions; users override any of them through ``session(conf=...)``
DEFAULT_SESSION_CONF = {
    "spark.executor.memory": EXECUTOR_MEMORY,
    "spark.driver.memory": DRIVER_MEMORY,
    # small benchmark jobs: 200 shuffle partitions would be 200 tiny tasks per micro-batch
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # an instance means an executor: no speculative copies (masters.sizing_settings turns dynamic allocation off)
    "spark.speculation": "false",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    # query.stop() waits for the running micro-batch, by default forever: a batch stuck on a dead broker or a
    # lost executor must not hang teardown (stop() then raises, and the session's stop ends the batch)
    "spark.sql.streaming.stopTimeout": "30s",
    # nor the session's stop: the context cleaner's blocking broadcast removal asks every executor and waits out
    # the RPC timeout (120 s) for one whose host went silent, and SparkContext.stop waits for the cleaner
    "spark.cleaner.referenceTracking.blocking": "false",
    # the runner counts per micro-batch (records read, dropped as late) over the progresses Spark keeps, 100 by
    # default: fewer than a measurement's batches where they are short
    "spark.sql.streaming.numRecentProgressUpdates": "1000",
    # stated on every session: PySpark starts a process's JVM with its first session's settings as spark-submit
    # options, which become every later session's defaults -- a capacity measurement's event log (a directory
    # removed after it) would otherwise be on in the next session, which refuses the missing directory
    "spark.eventLog.enabled": "false",
}


#: session settings on the plugin's own standalone cluster, whose executors run this Python environment
STANDALONE_SESSION_CONF = {"spark.python.daemon.module": "pytest_theodolite.infra.spark.pyspark_daemon"}


def standalone_session_conf(work_dir: Path) -> dict[str, str]:
    """Session settings on the plugin's own standalone cluster whose files live in `work_dir`: the executors'
    temporary files go there too, removed with it. A JVM that is killed (its cgroup removed, Ctrl-C) leaves
    in java.io.tmpdir what it meant to delete at exit -- lz4-java's native library, 150 KB a run in /tmp."""
    temp = str(work_dir / "tmp")
    if any(c.isspace() for c in temp):  # Spark splits the options at whitespace outside quotes
        temp = f'"{temp}"'
    # the default options, not extraJavaOptions: a job's own spark.executor.extraJavaOptions is added to them
    return {**STANDALONE_SESSION_CONF, "spark.executor.defaultJavaOptions": f"-Djava.io.tmpdir={temp}"}


def _spark_env(work_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    home = str(pyspark_home())
    env.update(
        SPARK_HOME=home,
        SPARK_LOG_DIR=str(work_dir / "logs"),
        SPARK_WORKER_DIR=str(work_dir / "work"),
        SPARK_LOCAL_DIRS=str(work_dir / "local"),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_NO_DAEMONIZE="1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    env.setdefault("JAVA_HOME", str(Path(os.path.realpath(java_executable())).parent.parent))
    return env


@dataclass
class StandaloneCluster:
    """A Spark standalone master and ``workers`` one-core workers on 127.0.0.1, each worker (and the
    executor it launches) optionally in its own CPU-limited cgroup."""

    workers: int = 4
    instance_cpu: float | None = None  # cores per instance; None = unlimited
    work_dir: Path | None = None
    start_timeout_s: float = 120.0
    die_with_parent: bool = True
    master_url: str = field(default="", init=False)
    processes: list[ManagedProcess] = field(default_factory=list, init=False)
    cgroup_support: cgroups.CgroupSupport | None = field(default=None, init=False)
    instance_groups: cgroups.InstanceGroups | None = field(default=None, init=False)
    _own_work_dir: bool = field(default=False, init=False)
    _web_port: int = field(default=0, init=False)

    def start(self) -> StandaloneCluster:
        if self.workers < 1:
            raise TheodoliteSetupError(f"a Spark cluster needs at least one worker, got {self.workers}")
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="theodolite-spark-"))
            self._own_work_dir = True
        (self.work_dir / "tmp").mkdir(parents=True, exist_ok=True)  # the executors' java.io.tmpdir
        env = _spark_env(self.work_dir)
        spark_class = str(pyspark_home() / "bin" / "spark-class")
        port, self._web_port = free_port(), free_port()
        self.master_url = f"spark://{LOOPBACK}:{port}"
        try:
            self.processes.append(
                ManagedProcess(
                    [
                        spark_class,
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        LOOPBACK,
                        "--port",
                        str(port),
                        "--webui-port",
                        str(self._web_port),
                    ],
                    self.work_dir / "master.log",
                    env=env,
                    die_with_parent=self.die_with_parent,
                ).start()
            )
            self._wait_master()
            self._start_workers(spark_class, env)
            self._wait_workers()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_workers(self, spark_class: str, env: dict[str, str]) -> None:
        # every worker gets its own cgroup where possible, unlimited unless asked: a benchmark can then set
        # its instances' CPU share per session (SparkCluster.session(instance_cpu=...))
        assert self.work_dir is not None  # made by start()
        self.cgroup_support = cgroups.detect()
        if self.cgroup_support.available:
            self.instance_groups = cgroups.InstanceGroups(self.cgroup_support, self.instance_cpu)
        for index in range(self.workers):
            group = self.instance_groups.make(index) if self.instance_groups else None
            self.processes.append(
                ManagedProcess(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        LOOPBACK,
                        "--cores",
                        "1",
                        "--memory",
                        WORKER_MEMORY,
                        "--webui-port",
                        str(free_port()),
                        self.master_url,
                    ],
                    self.work_dir / f"worker-{index}.log",
                    env=env,
                    die_with_parent=self.die_with_parent,
                    before_exec=group.join_current_process if group else None,
                ).start()
            )

    def master_state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self._web_port}/json/", timeout=5) as response:
            return json.load(response)

    def _wait_master(self) -> None:
        self._wait(lambda: self.master_state().get("status") == "ALIVE", "the Spark master to come up")

    def _wait_workers(self) -> None:
        self._wait(
            lambda: self.master_state().get("aliveworkers", 0) >= self.workers,
            f"{self.workers} Spark workers to register",
        )

    def _wait(self, ready, what: str) -> None:
        def all_running() -> None:
            for process in self.processes:
                if not process.alive():
                    raise TheodoliteSetupError(
                        f"A Spark process exited while waiting for {what} (exit code {process.returncode()}). "
                        f"Last lines of {process.log_path}:\n{process.log_excerpt(20)}"
                    )

        # OSError: the web UI is not listening yet; ValueError: it answered, but not yet with its JSON state
        wait_until(
            ready,
            check=all_running,
            timeout_s=self.start_timeout_s,
            interval_s=0.25,
            transient=(OSError, ValueError),
            error=TheodoliteSetupError,
            what=f"Timed out after {self.start_timeout_s:.0f} s waiting for {what}; logs are in {self.work_dir}",
        )

    def stop(self) -> None:
        for process in reversed(self.processes):  # workers first: they take their executors with them
            process.stop()
        self.processes.clear()
        if self.instance_groups is not None:
            self.instance_groups.remove_all()
        if self._own_work_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class SparkCluster:
    """What the ``spark_cluster`` fixture gives: sessions with a chosen number of executor instances."""

    master_url: str
    max_instances: int
    jars: list[Path]
    instance_cpu: float | None = None  # the default CPU share of an instance; None = unlimited
    #: the workers' cgroups, whose quota a session sets (empty: not limitable, e.g. a remote master)
    instance_groups: list[cgroups.CpuLimitedGroup] = field(default_factory=list)
    #: a file lock held for a whole session where several processes share the cluster (pytest-xdist): one
    #: session at a time, so no two sub-experiments (or a test and a sub-experiment) share the instances or
    #: change each other's CPU quota
    session_lock: Path | None = None
    base_conf: Mapping[str, str] = field(default_factory=dict)
    register_timeout_s: float = 120.0
    kind: MasterKind = MasterKind.MANAGED
    access: ClusterAccess = field(default_factory=ClusterAccess)
    #: where jobs' checkpoints go (infra/spark/shipping.py); None: a temporary directory of this machine
    checkpoint_root: str | None = None
    #: the release of the Kafka connector in `jars` where it is not the installed pyspark's (infra/spark/jars.py:
    #: the nearest one Maven resolved); None: the same release
    connector_fallback: str | None = None
    #: where a run's temporary files go on this machine (its checkpoint where `checkpoint_root` is None): the
    #: plugin's own cluster's directory, removed once its executors are gone -- an executor still exiting may
    #: write a state file after its run removed them; None: the system's temporary directory
    scratch_dir: Path | None = None

    def master_for(self, instances: int) -> str:
        # local-cluster[workers, cores per worker, MiB per worker] starts its workers inside the driver
        if self.master_url == "local-cluster":
            return f"local-cluster[{instances},1,{int(EXECUTOR_MEMORY.rstrip('g')) * 1024 + 512}]"
        return self.master_url

    @property
    def can_limit_cpu(self) -> bool:
        """The instances' CPU share can be set and lifted inside a running session (the plugin's cgroups)."""
        return bool(self.instance_groups)

    @property
    def limits_instance_cpu(self) -> bool:
        """An instance's CPU share is enforced at all: by cgroups, or by the cluster (Kubernetes pod limits,
        fixed for a session's lifetime)."""
        return self.can_limit_cpu or self.kind is MasterKind.KUBERNETES

    def set_instance_cpu(self, cpus: float | None) -> None:
        # written every time, not only when this object last set another value: pull-request mode's two
        # driver processes each hold a copy of the cluster and take turns with the same groups
        for group in self.instance_groups:
            group.set_cpus(cpus)

    def instance_cpu_seconds(self) -> float | None:
        """CPU seconds the instances (their cgroups) used so far; None where the cluster has no groups to read
        (a remote master) or one cannot be read."""
        each = self.instance_cpu_seconds_each()
        return None if each is None else sum(each)

    def instance_cpu_seconds_each(self) -> list[float] | None:
        """CPU seconds each instance's group used so far, in the groups' order; None where one is unreadable."""
        used = [group.cpu_seconds() for group in self.instance_groups]
        return None if not used or any(u is None for u in used) else [u for u in used if u is not None]

    def instance_throttling(self) -> tuple[int, int] | None:
        """(CPU-quota periods, periods throttled) summed over the instances' groups; None where unreadable."""
        counts = [group.throttling() for group in self.instance_groups]
        if not counts or any(c is None for c in counts):
            return None
        return sum(c[0] for c in counts if c), sum(c[1] for c in counts if c)

    @contextmanager
    def sessions_held(self) -> Iterator[None]:
        """The session lock held by the caller (sessions inside start with ``lock=False``): no other process's
        session uses the instances meanwhile."""
        with FileLock(str(self.session_lock)) if self.session_lock else nullcontext():
            yield

    def limit_instances(self, instance_cpu: float | str | None = "default") -> None:
        """Apply the instances' CPU limit inside a running session (one started with ``instance_cpu=None``,
        e.g. to prime a job at full speed first); the session's lock is already held."""
        self.set_instance_cpu(self._cpu(instance_cpu))

    def _cpu(self, instance_cpu: float | str | None) -> float | None:
        """``"default"``: the cluster's own instance CPU; otherwise the given one."""
        return self.instance_cpu if isinstance(instance_cpu, str) else instance_cpu

    def check_executor_python(self, modules: Sequence[str] = ()) -> None:
        """On a cluster the plugin did not start, one executor's Python checked against this driver's (version,
        `modules` importable: executors.check_executor_python); those it starts run this Python already."""
        if self.kind.started_here:
            return
        with self.session(instances=1, instance_cpu=None, app_name="theodolite-executor-python") as spark:
            check_executor_python(spark, modules)

    @contextmanager
    def session(
        self,
        instances: int = 1,
        conf: Mapping[str, str] | None = None,
        app_name: str = "theodolite",
        instance_cpu: float | str | None = "default",
        py_files: Sequence[Path] = (),
        lock: bool = True,
    ) -> Iterator[Any]:
        """A SparkSession with exactly ``instances`` one-core executors registered; stopped on exit.

        ``instance_cpu`` (cores per instance, None = unlimited) applies where the cluster's workers run in
        cgroups; by default the cluster's own setting (``--theodolite-instance-cpu``). The limit is set once
        the executors have registered: starting a JVM is setup, not the processing under test, and at a
        quarter core it alone takes three times as long. On Kubernetes it is the pods' CPU limit, for the
        session's lifetime. ``py_files`` (.py or .zip) are shipped to the executors: the job's code, where
        they do not share this machine's Python path. ``lock=False``: the caller holds the cluster's session
        lock for this session and another one beside it (pull-request mode's paired read: each side's session
        on an instance of its own, at the same time)."""
        from pyspark.sql import SparkSession

        if not 1 <= instances <= self.max_instances:
            raise ValueError(
                f"instances={instances} is outside 1..{self.max_instances}: this cluster has {self.max_instances} "
                "one-core workers (raise --theodolite-max-instances to start more)"
            )
        if SparkSession.getActiveSession() is not None:
            raise RuntimeError("another SparkSession is still active in this process; stop it first")
        cpu = self._cpu(instance_cpu)
        chosen = {**self.base_conf, **(conf or {})}
        connect = masters.connect_requested(chosen, os.environ)
        if connect:
            raise TheodoliteSetupError(
                f"{connect} asks for a Spark Connect session, whose client cannot choose how many executors run "
                "its queries -- an instance count is what a gate measures: remove it (unset the variable)"
            )
        settings = {
            **DEFAULT_SESSION_CONF,
            **masters.access_settings(self.kind, self.access),
            **chosen,
            # how many instances, and how big, is what the gate measures: no setting of a job overrides it
            **masters.sizing_settings(self.kind, instances, cpu),
            "spark.master": self.master_for(instances),
            "spark.app.name": app_name,
            "spark.jars": session_jars(self.jars, chosen),
        }
        builder = SparkSession.builder
        for key, value in settings.items():
            builder = builder.config(key, value)
        with FileLock(str(self.session_lock)) if self.session_lock and lock else nullcontext():
            self.set_instance_cpu(None)  # under the lock: another worker's session may be using the instances
            with _executors_run_this_python(self.kind.started_here), _refused_by_the_cluster(self):
                spark = _without_pyspark_sigint_handler(builder.getOrCreate)
            driver_path = list(sys.path)
            try:
                wait_for_executors(spark, instances, self.register_timeout_s, self.kind)
                for path in py_files:
                    spark.sparkContext.addPyFile(str(path))
                # addPyFile also puts each file on this process's path (for local mode): the driver imports the
                # job from its own tree, and the copies go with the session
                sys.path[:] = driver_path
                self.set_instance_cpu(cpu)
                yield spark
            finally:
                sys.path[:] = driver_path
                spark.stop()


def session_jars(connector_jars: Sequence[Path], conf: Mapping[str, str]) -> str:
    """``spark.jars`` of a session: the Kafka connector's, then the user's own (--spark-conf spark.jars=..., a
    gate's spark_conf), e.g. a checkpoint store's client."""
    own = [jar.strip() for jar in conf.get("spark.jars", "").split(",") if jar.strip()]
    return ",".join([str(jar) for jar in connector_jars] + own)


@contextmanager
def _executors_run_this_python(started_here: bool) -> Iterator[None]:
    """On a cluster the plugin started, the executors run the interpreter that runs pytest, unless the user
    named one in ``PYSPARK_PYTHON``. PySpark reads the executors' Python from the driver's ``PYSPARK_PYTHON``
    once, when the SparkContext starts, else runs ``python3`` from the executors' PATH: a venv's interpreter
    run by path (not activated) would send every Python worker to another Python without the job's packages.
    Set for the context's start only, so that no later process of the user's inherits it."""
    if not started_here or "PYSPARK_PYTHON" in os.environ:
        yield
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        yield
    finally:
        os.environ.pop("PYSPARK_PYTHON", None)


@contextmanager
def _refused_by_the_cluster(cluster: SparkCluster) -> Iterator[None]:
    """A session its cluster manager refused (a YARN queue that admits nothing, a master that rejects the
    application) as one setup error with the manager's own reason, not py4j's Java stack trace."""
    try:
        yield
    except Exception as exc:
        java = getattr(exc, "java_exception", None)  # py4j's Py4JJavaError
        if java is None:
            raise
        reason = str(java.toString()).strip()
        raise TheodoliteSetupError(
            f"Spark could not start a session on {cluster.master_url}: {reason}. "
            + registration_hint(cluster.kind)
        ) from None


def _without_pyspark_sigint_handler(create):
    """Call ``create`` (which makes a SparkContext) and put back the SIGINT handler it replaced.

    PySpark installs a handler that cancels the context's jobs and then raises KeyboardInterrupt, and never
    removes it: after ``spark.stop()``, or while the next context starts, Ctrl-C then raises an AttributeError
    from inside whatever was running, a test error instead of an interrupted run. With Python's own handler
    Ctrl-C raises KeyboardInterrupt, and the session's context managers stop the query and the context."""
    if threading.current_thread() is not threading.main_thread():
        return create()  # signal handlers can only be set in the main thread (PySpark sets none then either)
    previous = signal.getsignal(signal.SIGINT)
    try:
        return create()
    finally:
        signal.signal(signal.SIGINT, previous)
