"""The executors of a running PySpark session, as its driver sees them: their addresses and ids, waiting for
them to register, replacing one, and the driver JVM's own process."""

from __future__ import annotations

import socket
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pytest_theodolite.core.errors import TheodoliteSetupError, TheodoliteSetupWarning
from pytest_theodolite.infra.spark.masters import MasterKind
from pytest_theodolite.infra.waiting import wait_until


def driver_jvm_pid(spark: Any) -> int | None:
    """The process of the JVM a PySpark session's driver runs in (pyspark's gateway launched it), where this
    process launched it; None for a remote driver (Spark Connect) or where pyspark does not say."""
    gateway = getattr(getattr(spark, "sparkContext", None), "_gateway", None)
    proc = getattr(gateway, "proc", None)
    pid = getattr(proc, "pid", None)
    return pid if isinstance(pid, int) else None


def executor_addresses(spark) -> frozenset[str]:
    """host:port of every block manager registered now, the driver's included: an executor that died and was
    replaced by a new one shows as an address gone, even while the count is whole again."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return frozenset(f"{info.host()}:{info.port()}" for info in infos)


def unanswered(addresses: Iterable[str], timeout_s: float = 3.0) -> dict[str, str]:
    """Of block-manager addresses (``host:port``), those that take no TCP connection, each with why: "refused"
    (its process is gone) or "silent" (no answer within `timeout_s`: its host or link went silent). Spark itself
    notices a silent one only when its heartbeats time out (60-120 s), long after a measurement has read the
    stalled query as a growing lag. Asked at once, so a silent host costs one timeout."""

    def answer(address: str) -> str | None:
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return None
        except ConnectionRefusedError:
            return "refused"
        except (OSError, ValueError):  # a timeout, an unreachable network
            return "silent"

    listed = sorted(set(addresses))
    if not listed:
        return {}
    with ThreadPoolExecutor(max_workers=len(listed)) as pool:
        return {a: why for a, why in zip(listed, pool.map(answer, listed), strict=True) if why is not None}


def executor_ids(spark) -> list[str]:
    """The ids of the executors registered now, in the order they came."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    return sorted((ids.apply(i) for i in range(ids.size())), key=int)


def replace_executor(spark, timeout_s: float = 60.0) -> None:
    """Kill the application's only executor and wait until the cluster manager has launched another in its
    place: a new JVM, on a worker of the manager's choice. Its running tasks are retried on the new one. Raises
    TheodoliteSetupError where none registered within `timeout_s`."""
    before = executor_ids(spark)
    if len(before) != 1:
        raise TheodoliteSetupError(
            f"replacing an executor needs exactly one, the application has {len(before)}"
        )
    addresses_before = executor_addresses(spark)
    spark.sparkContext._jsc.sc().killAndReplaceExecutor(before[0])
    wait_until(
        lambda: has_replaced(before[0], addresses_before, executor_ids(spark), executor_addresses(spark)),
        timeout_s=timeout_s,
        interval_s=0.05,
        error=TheodoliteSetupError,
        what=lambda: f"no executor replaced executor {before[0]} within {timeout_s:.0f} s",
    )


def has_replaced(
    executor: str, addresses_before: frozenset[str], ids: list[str], addresses: frozenset[str]
) -> bool:
    """Whether one executor other than `executor` is registered (`ids`) and the block managers (`addresses`,
    the driver's and one executor's) are the driver's and the new one's. The scheduler forgets a killed
    executor before the block manager master does: for a while `executor`'s block manager is still listed,
    and an address taken then would be reported lost a moment later. Until a new block manager has its port
    it shows at port 0."""
    return (
        executor not in ids
        and len(ids) == 1
        and len(addresses) == 2
        and not addresses_before <= addresses  # the killed executor's address is gone
        and not any(a.endswith(":0") for a in addresses)
    )


def registered_executors(spark) -> int:
    """Executors registered with the driver (the driver itself is listed too, hence the -1)."""
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1


def wait_for_executors(
    spark, instances: int, timeout_s: float, kind: MasterKind = MasterKind.MANAGED
) -> None:
    """Wait until `instances` executors registered, then check that no more did: a gate that measured r
    instances on more would report a demand the job does not have."""
    wait_until(
        lambda: registered_executors(spark) >= instances,
        timeout_s=timeout_s,
        interval_s=0.05,
        error=TheodoliteSetupError,
        what=lambda: (
            f"Only {registered_executors(spark)} of {instances} Spark executors registered within "
            f"{timeout_s:.0f} s. {registration_hint(kind)}"
        ),
    )
    registered = registered_executors(spark)
    if registered != instances:
        raise TheodoliteSetupError(
            f"The {kind.value} cluster gave {registered} Spark executors where {instances} were asked for: a "
            "gate measures exactly that many instances. Check that nothing else sizes the application "
            "(spark-defaults.conf: spark.executor.instances, dynamic allocation) and that each executor "
            "has one core."
        )


_REGISTRATION_HINTS = {
    MasterKind.MANAGED: "Check that the cluster has enough free one-core workers and memory.",
    MasterKind.LOCAL_CLUSTER: "Check that this machine has the memory for that many executor JVMs.",
    MasterKind.STANDALONE: (
        "Check that the master has that many free cores on its workers, and that the workers can reach this "
        "driver (--spark-driver-host: an address of this machine the workers can connect to)."
    ),
    MasterKind.KUBERNETES: (
        "Check the executor pods (kubectl get pods -l spark-role=executor): an image that cannot be pulled, "
        "a namespace quota, or a driver address the pods cannot reach (--spark-driver-host)."
    ),
    MasterKind.YARN: (
        "Check the application in YARN's ResourceManager: the queue's free vcores and memory, and that the "
        "NodeManagers can reach this driver (--spark-driver-host)."
    ),
}


def registration_hint(kind: MasterKind) -> str:
    """Where to look when a cluster of this kind does not start or size a session."""
    return _REGISTRATION_HINTS[kind]


def executor_python(spark: Any, modules: Sequence[str]) -> tuple[str, str, list[str]]:
    """What one executor's Python worker is: its version (``3.11``), its interpreter, and which of `modules`
    it cannot import."""

    def probe(_: object) -> tuple[str, str, list[str]]:
        import importlib.util
        import sys

        missing = [name for name in modules if importlib.util.find_spec(name) is None]
        return f"{sys.version_info.major}.{sys.version_info.minor}", sys.executable, missing

    [answer] = spark.sparkContext.parallelize([0], 1).map(probe).collect()
    version, executable, missing = answer
    return str(version), str(executable), list(missing)


#: what each problem's message ends with: how the executors get a Python that serves the job
EXECUTOR_PYTHON_FIX = (
    "Install the same Python and the job's packages on the cluster's nodes, or set PYSPARK_PYTHON, where pytest "
    "runs, to a Python at a path every node has (the driver tells the executors which to run)"
)


def check_executor_python(spark: Any, modules: Sequence[str]) -> None:
    """Refuse, at setup, executors that cannot run this driver's Python (another version, or none that starts):
    every task with a Python worker would fail mid-measurement instead, each point ERRORED. Packages of
    `modules` (what the job's module imports) they cannot import are named in a warning, not refused: a job
    that runs wholly in the JVM never imports them there."""
    import sys

    driver = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        version, executable, missing = executor_python(spark, modules)
    except Exception as exc:  # py4j and pyspark raise many types; the executors' Python did not answer
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TheodoliteSetupError(
            f"the executors could not run this driver's Python ({first[:300]}). {EXECUTOR_PYTHON_FIX}"
        ) from None
    if version != driver:
        raise TheodoliteSetupError(
            f"the executors run Python {version} ({executable}), this driver Python {driver}. "
            f"{EXECUTOR_PYTHON_FIX}"
        )
    if missing:
        warnings.warn(
            TheodoliteSetupWarning(
                f"the executors' Python ({executable}) cannot import {', '.join(missing)}, which the job's module "
                "imports: a job that runs Python there (UDFs, foreachBatch) fails at its first micro-batch. "
                f"{EXECUTOR_PYTHON_FIX}"
            ),
            stacklevel=2,
        )
