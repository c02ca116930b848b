"""One version of a job, driven from its own Python process: the two sides of pull-request mode.

Two versions of ``spark_jobs`` cannot live in one Python process (one ``sys.modules``), and a PySpark driver
is one per process anyway. So each side -- REF's worktree and the working tree -- gets a driver process of
its own (``multiprocessing`` spawn: a fresh interpreter). It imports the measuring code (pytest_theodolite,
the load generator) as the parent has it, so both sides are measured by the very same code, and then the job
module from its own tree, which goes first on ``sys.path``; it checks the job really came from that tree.
Its executors get the tree as their ``PYTHONPATH`` too (for jobs with Python UDFs). Both sides use the
session's broker and Spark cluster, one sub-experiment at a time, each in its own Spark application.

The parent sends a (load, resources, workload) and gets the sub-experiment's record back; the side writes
its raw series into its own results directory (``<results>/<side>/``). A paired backlog read
(engine/backlog_read.py) is the one thing both sides do at the same time: the parent asks both, holding the
cluster's session lock, and each side's session runs on an instance of its own; while it reads, a side sends its
batches' cycle per record as they come in, and the parent may tell both to stop.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pytest_theodolite.core.job_contract import JobContractError
from pytest_theodolite.core.records import SubExperimentRecord
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.backlog_read import BacklogPlan, BacklogRead, read_backlog
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement, ProbePlan, measure_capacity
from pytest_theodolite.engine.job import RunAborted
from pytest_theodolite.engine.runner import ExperimentRunner, PhaseTimings, new_writer
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.process import die_with_parent, interruptible_child
from pytest_theodolite.infra.spark.shipping import EXECUTOR_PYTHONPATH
from pytest_theodolite.infra.waiting import poll_until
from pytest_theodolite.pull_request.side_spec import SideError, SideSpec
from theodolite_generator import Workload

#: how long a side may take to start (interpreter, imports) before it counts as broken
START_TIMEOUT_S = 120.0
#: how long a driver process that waits for work takes to act on "stop"; one still busy after this is in the
#: middle of a sub-experiment and gets SIGINT
IDLE_STOP_S = 3.0


def _import_job(spec: SideSpec) -> tuple[Any, Path]:
    """The job function from the side's own tree and the file it came from; raises SideError when it is not
    there."""
    root = str(spec.job_root)
    sys.path.insert(0, root)
    top = spec.job_module.split(".")[0]
    for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        del sys.modules[name]  # imported from elsewhere before the path was set: import it again
    try:
        module = importlib.import_module(spec.job_module)
    except Exception as exc:
        raise SideError(
            f"{spec.side}: the job module {spec.job_module} cannot be imported from {root}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    origin = Path(getattr(module, "__file__", "") or "").resolve()
    if not origin.is_relative_to(Path(root).resolve()):
        raise SideError(
            f"{spec.side}: {spec.job_module} was imported from {origin}, not from {root}: the two versions "
            "would mix (is the job installed into site-packages rather than in editable mode?)"
        )
    job: Any = module
    for part in spec.job_name.split("."):
        job = getattr(job, part, None)
        if job is None:
            raise SideError(f"{spec.side}: {spec.job_module} at {root} has no {spec.job_name}")
    return job, origin


def _fixed_workload(workload: Workload) -> Callable[[int], Workload]:
    return lambda _load: workload


def serve(connection: Connection, spec: SideSpec) -> None:
    """The side's process: import the job, then run sub-experiments as the parent asks until told to stop."""
    die_with_parent()  # a parent killed without cleanup takes this driver (and its JVM) with it
    interruptible_child()  # the parent interrupts a running sub-experiment with SIGINT (close())
    try:
        job, origin = _import_job(spec)
        kafka = KafkaCluster(**spec.kafka)
        conf = {**spec.settings.spark_conf, EXECUTOR_PYTHONPATH: str(spec.job_root)}
        settings = replace(spec.settings, spark_conf=conf)
        benchmark = replace(spec.benchmark, start_query=job)
        try:
            benchmark.check_job()  # REF's job too: the base revision may predate a keyword
        except JobContractError as exc:
            raise SideError(f"{spec.side}: {exc}") from None
        job_file = str(origin)
        testbed = {**spec.testbed, "job_file": job_file}  # the results say which version was measured
        writer = new_writer(
            spec.results_dir, spec.experiment_id, benchmark, settings, Metric.DEMAND, testbed, spec.job_root
        )
        runner = ExperimentRunner(
            benchmark,
            settings,
            kafka,
            spec.spark,
            writer,
            generator_client_config=dict(spec.generator_client_config),
        )
    except BaseException as exc:
        connection.send(("error", str(exc) if isinstance(exc, SideError) else traceback.format_exc()))
        return
    connection.send(("ready", job_file))
    try:
        while True:
            message = connection.recv()
            if message[0] == "stop":
                break
            if message == ("stop_read",):
                continue  # the parent told a read to stop that had ended by itself
            kind, load, resources, workload, *options = message
            try:
                runner.benchmark = replace(benchmark, workload=_fixed_workload(workload))
                if kind == "backlog":
                    (plan,) = options
                    # the parent holds the session lock: the other side's session runs beside this one
                    read = read_backlog(
                        runner,
                        load,
                        plan,
                        workload=workload,
                        lock=False,
                        filled=lambda: _filled(connection),
                        progress=lambda figures: _read_so_far(connection, figures),
                    )
                    connection.send(("backlog", read))
                    continue
                if kind == "capacity":
                    plan, attempt = options
                    measurement = measure_capacity(
                        runner, resources, load, plan, workload=workload, attempt=attempt
                    )
                    writer.record_capacity_measurement(measurement.to_dict())
                    connection.send(("capacity", measurement))
                    continue
                (share,) = options
                runner.offer(share)
                if kind == "confirm":
                    record = runner.confirm_sub_experiment(load, resources)
                else:
                    record = runner.run_sub_experiment(load, resources)
                timings = {k: v for k, v in runner.timings.items() if k[:2] == (load, resources)}
                connection.send(("record", record, timings))
            except RunAborted as exc:  # a read the job made impossible: its reason says what to change
                connection.send(("error", exc.reason))
            except Exception:
                connection.send(("error", traceback.format_exc()))
    except (
        KeyboardInterrupt
    ):  # the runner has stopped what the sub-experiment started; what finished is saved
        pass
    finally:
        kafka.close()


def _filled(connection: Connection) -> None:
    """Tell the parent this side's backlog is filled and wait until it says read (SideProcess.start_reading)."""
    connection.send(("filled",))
    message = connection.recv()
    if message != ("read",):
        raise RuntimeError(f"waited for ('read',) after the fill, got {message!r}")


def _read_so_far(connection: Connection, figures: list[list[float]] | None) -> bool:
    """Send the parent the read's batches' cycle per record so far, leg by leg, where there are new ones;
    whether it has said stop (SideProcess.stop_reading)."""
    if figures is not None:
        connection.send(("batches", figures))
    if not connection.poll(0):
        return False
    message = connection.recv()
    if message != ("stop_read",):
        raise RuntimeError(f"waited for ('stop_read',) during the read, got {message!r}")
    return True


@dataclass
class SideProcess:
    """A side's driver process for as long as the context lasts (stopped on exit, failure or Ctrl-C)."""

    spec: SideSpec
    stop_timeout_s: float = 60.0
    job_file: str = field(default="", init=False)  # where the side imported its job from
    _process: Any = field(default=None, init=False, repr=False)
    _connection: Connection | None = field(default=None, init=False, repr=False)

    def __enter__(self) -> SideProcess:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._process = context.Process(
            target=serve, args=(child, self.spec), name=f"theodolite-{self.spec.side}", daemon=False
        )
        self._process.start()
        child.close()
        self._connection = parent
        try:
            kind, detail = self._receive(START_TIMEOUT_S, "start")
            if kind != "ready":
                raise SideError(detail)
            self.job_file = detail
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, message: tuple[Any, ...]) -> None:
        if self._connection is None:
            raise SideError(f"{self.spec.side}: not started")
        self._connection.send(message)

    def _receive(self, timeout_s: float | None, doing: str) -> tuple[Any, ...]:
        if self._connection is None:
            raise SideError(f"{self.spec.side}: not started")
        if not self._connection.poll(timeout_s):
            raise SideError(f"{self.spec.side}: its driver process did not {doing} within {timeout_s:g} s")
        try:
            return self._connection.recv()
        except EOFError:
            code = self._process.exitcode if self._process is not None else None
            raise SideError(
                f"{self.spec.side}: its driver process died (exit code {code}) during {doing}"
            ) from None

    def _expect(self, kind: str, doing: str, failed: str) -> tuple[Any, ...]:
        """The side's next message, which must be `kind`; its error otherwise, raised as "<failed> failed"."""
        message = self._receive(None, doing)
        if message[0] != kind:
            raise SideError(f"{self.spec.side}: {failed} failed: {message[1]}")
        return message

    def run(
        self, load: int, resources: int, workload: Workload, *, confirm: bool = False, share: float = 1.0
    ) -> tuple[SubExperimentRecord, dict[Any, PhaseTimings]]:
        """One sub-experiment of this side (with `confirm`: one more repetition of one it ran, combined with
        it), `workload` offered at `share` of its rate (the same for every sub-experiment of a benchmark); its
        record and phase timings."""
        self._send(("confirm" if confirm else "run", load, resources, workload, share))
        where = f"load={load} instances={resources}"
        message = self._expect("record", f"the sub-experiment {where}", where)
        return message[1], message[2]

    def measure_capacity(
        self, load: int, resources: int, workload: Workload, plan: ProbePlan, *, attempt: int = 0
    ) -> CapacityMeasurement:
        """This side's capacity at `resources` instances, the generator offering `workload` (capacity_probe)."""
        self._send(("capacity", load, resources, workload, plan, attempt))
        doing = f"the capacity measurement of {resources} instances"
        return self._expect("capacity", doing, f"the capacity of {resources} instances")[1]

    def start_backlog_read(self, load: int, workload: Workload, plan: BacklogPlan) -> None:
        """Ask this side to fill a backlog of `workload` and read it on one instance (engine/backlog_read.py), in
        a session started without the cluster's lock, which the caller holds. Then `backlog_filled` waits for
        the fill, `start_reading` lets the read begin and `backlog_read` gives its result: both sides asked one
        after the other, each let read once both have filled, read at the same time from the same moment."""
        self._send(("backlog", load, 1, workload, plan))

    def backlog_filled(self) -> None:
        """Return once this side has filled its backlog (its generator still sending until `start_reading`)."""
        self._expect("filled", "the backlog's fill", "the backlog read")

    def start_reading(self) -> None:
        """Let this side's read begin (after `backlog_filled`)."""
        self._send(("read",))

    def backlog_message(self, timeout_s: float) -> list[list[float]] | BacklogRead | None:
        """During the read (after `start_reading`): this side's batches' cycle per record so far (leg by leg), its
        finished read, or None where it said nothing within `timeout_s`. Raises SideError where the read
        failed."""
        if self._connection is None:
            raise SideError(f"{self.spec.side}: not started")
        if not self._connection.poll(timeout_s):
            return None
        message = self._receive(0, "the backlog read")
        if message[0] == "batches":
            return [list(leg) for leg in message[1]]
        if message[0] == "backlog":
            return message[1]
        raise SideError(f"{self.spec.side}: the backlog read failed: {message[1]}")

    def stop_reading(self) -> None:
        """Tell this side to end its read now; the batches it finished are its read."""
        self._send(("stop_read",))

    def close(self) -> None:
        """Stop the driver process: at once when it waits for work; in the middle of a sub-experiment
        (Ctrl-C, a failure on the other side), interrupted as Ctrl-C would, so that it stops what it started."""
        close_sides([self])

    def _detach(self) -> Any:
        """Tell the driver process to stop and let go of it: the process to wait for, or None."""
        process, connection = self._process, self._connection
        self._process = self._connection = None
        if connection is not None:
            try:
                connection.send(("stop",))
            except (OSError, ValueError):
                pass
            connection.close()
        return process


def close_sides(sides: Iterable[SideProcess]) -> None:
    """Stop several sides' driver processes together (SideProcess.close): each is told to stop, those still busy
    after `IDLE_STOP_S` are interrupted at the same moment, and each escalation waits once for all of them --
    both sides busy with a paired read stop in the time of the slower one, not of the two one after the other."""
    sides = list(sides)
    timeout_s = max((side.stop_timeout_s for side in sides), default=0.0)
    processes = [process for process in (side._detach() for side in sides) if process is not None]
    _join_all(processes, IDLE_STOP_S)
    for process in processes:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGINT)
    _join_all(processes, timeout_s)
    for escalate, wait_s in ((lambda p: p.terminate(), 10.0), (lambda p: p.kill(), 5.0)):
        alive = [process for process in processes if process.is_alive()]
        for process in alive:
            escalate(process)
        _join_all(alive, wait_s)
    for process in processes:
        process.close()


def _join_all(processes: Sequence[Any], timeout_s: float) -> None:
    """Wait until every process has ended, at most `timeout_s` for all of them together."""
    poll_until(lambda: not any(process.is_alive() for process in processes), timeout_s=timeout_s)
