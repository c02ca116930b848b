"""Samples, beside the lag, where the host's CPU went: the cumulative series core/contention.py judges.

Roles: the broker (where it is a local process: the embedded broker), the generator's worker processes, and
the driver -- this process and the Spark driver JVM it talks to. What the host's busy cores spent beyond those
and the instances is "others": other tests, other tenants, the standalone cluster's master, the hypervisor's
steal.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from pytest_theodolite.core.contention import (
    SERIES_BROKER_CPU,
    SERIES_DRIVER_CPU,
    SERIES_GENERATOR_CPU,
    SERIES_HOST_BUSY,
    SERIES_LIMITED_INSTANCE_CPU,
    SERIES_QUOTA_PERIODS,
    SERIES_THROTTLED_PERIODS,
    instance_series,
)
from pytest_theodolite.infra import procfs
from pytest_theodolite.infra.spark.cluster import SparkCluster

#: every series a HostSampler writes (and one per instance, ``instance_series``)
HOST_SERIES = (
    SERIES_HOST_BUSY,
    SERIES_LIMITED_INSTANCE_CPU,
    SERIES_BROKER_CPU,
    SERIES_GENERATOR_CPU,
    SERIES_DRIVER_CPU,
    SERIES_QUOTA_PERIODS,
    SERIES_THROTTLED_PERIODS,
)


class HostSampler:
    """One sample = the cumulative values of ``HOST_SERIES`` now (those that could be read)."""

    def __init__(
        self,
        spark: SparkCluster,
        broker_pids: Collection[int],
        generator_pids: Collection[int],
        driver_jvm_pid: int | None,
    ) -> None:
        self.spark = spark
        self.broker_pids = tuple(broker_pids)
        self.generator_pids = tuple(generator_pids)
        self.driver_jvm_pids = () if driver_jvm_pid is None else (driver_jvm_pid,)
        self.cores: int | None = None

    def sample(self) -> dict[str, float]:
        host = procfs.host_cpu_times()
        if host is None:
            return {}
        self.cores = host.cores
        values = {SERIES_HOST_BUSY: host.busy_s}
        parent_of = procfs.parents()
        if self.broker_pids:
            values[SERIES_BROKER_CPU] = procfs.cpu_seconds(procfs.descendants(self.broker_pids, parent_of))
        if self.generator_pids:
            values[SERIES_GENERATOR_CPU] = procfs.cpu_seconds(
                procfs.descendants(self.generator_pids, parent_of)
            )
        # not every process below this one: a test's own children are others, not the driver
        driver = {os.getpid()} | procfs.descendants(self.driver_jvm_pids, parent_of)
        values[SERIES_DRIVER_CPU] = procfs.cpu_seconds(driver)
        each = self.spark.instance_cpu_seconds_each()
        if each is not None:
            values[SERIES_LIMITED_INSTANCE_CPU] = sum(each)
            # each instance's too: a job whose partitions spread unevenly keeps its busiest instance at the
            # quota while the others wait, which the sum alone would read as starvation
            values.update({instance_series(i): seconds for i, seconds in enumerate(each)})
        throttling = self.spark.instance_throttling()
        if throttling is not None:
            values[SERIES_QUOTA_PERIODS], values[SERIES_THROTTLED_PERIODS] = map(float, throttling)
        return values
