"""Testbed calibration: how fast this host runs a fixed reference job on one CPU-limited instance.

A stored baseline answers a question about the testbed it was recorded on. The calibration -- the rows/s a
CPU-bound reference job (SHA-512 per row, which code generation cannot fold away) sustains on one instance
limited to ``REFERENCE_CPU`` cores -- is stored with every baseline, so that a comparison can tell "the job
needs more instances" from "this host is slower". A point is never judged on the ratio's size alone: a testbed
read slower offers each load at the fastest speed the ratio allows (judge.comparison.offered_share), where a
pass holds however the ratio errs within its uncertainty; beyond the margin a demand above the baseline's is
reported as not comparable (exit code 7), never as a regression.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import platform
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from pytest_theodolite.store.calibrations import recent_calibration, remember_calibration

#: cores of the one instance the reference job runs on (where the cluster can limit it)
REFERENCE_CPU = 0.25
#: a baseline whose calibration differs by more than this share is not comparable; run to run on one host it
#: varied by a coefficient of variation of 7-10 % (max/min 1.20-1.32 over 5 runs,
#: experiments/calibration_spread.py), so 35 % is about 3.5 sigma
DEFAULT_MARGIN = 0.35


@dataclass(frozen=True)
class Calibration:
    rows_per_s: float  # the fastest of the timed runs: interference on a shared host only ever slows a run
    spread: float  # (max - min) / max over the timed runs: the calibration's own noise
    instance_cpu: float | None  # None: the instance was not CPU-limited
    #: the instance's CPU microseconds per reference row (the least of the timed runs, from its cgroup: JIT
    #: compilation still going on only ever adds CPU); unlike rows/s, CPU time hardly changes with what else
    #: the host runs; None where it cannot be read
    cpu_us_per_row: float | None = None
    #: seconds since an earlier run on this testbed measured it; None: measured by this run
    reused_after_s: float | None = None

    def describe(self) -> str:
        cpu = "unlimited" if self.instance_cpu is None else f"{self.instance_cpu:g} CPU"
        per_row = "" if self.cpu_us_per_row is None else f", {self.cpu_us_per_row:.2f} CPU us per row"
        reused = (
            ""
            if self.reused_after_s is None
            else f"; measured {self.reused_after_s / 60:.0f} min ago by an earlier run on this testbed"
        )
        return (
            f"{self.rows_per_s:,.0f} rows/s on one {cpu} instance (spread {self.spread:.0%}{per_row}{reused})"
        )


def reference_job(spark: Any, offset: int, rows: int) -> float:
    """Run the reference job on a fresh row range and return its rows/s. A new DataFrame each time:
    collecting one twice reuses its shuffle output and times nothing."""
    job = spark.range(offset, offset + rows, 1, 8).selectExpr("sum(hash(sha2(cast(id as string), 512)))")
    started = time.perf_counter()
    job.collect()
    return rows / (time.perf_counter() - started)


#: rows of one run of the reference job, and the timed runs of a calibration
REFERENCE_ROWS = 1_000_000
REFERENCE_REPEATS = 4


def calibrate(
    spark_cluster: Any, rows: int = REFERENCE_ROWS, repeats: int = REFERENCE_REPEATS
) -> Calibration:
    """Measure this testbed (half a minute): one instance, two runs to load classes and JIT-compile (without the
    CPU limit where it can be lifted, as the gates prime their jobs), then `repeats` timed runs under the limit --
    on every cluster that limits its instances, so that a baseline of limited instances compares with it."""
    # under the limit the instances run with wherever they are limited: lifted and set inside the session by
    # the plugin's cgroups; fixed for the session's lifetime by a cluster that limits its pods (Kubernetes)
    limited_from_start = spark_cluster.limits_instance_cpu and not spark_cluster.can_limit_cpu
    cpu = REFERENCE_CPU if spark_cluster.limits_instance_cpu else None
    offsets = itertools.count(1)
    session_cpu = cpu if limited_from_start else None
    with spark_cluster.session(
        instances=1, instance_cpu=session_cpu, app_name="theodolite-calibration"
    ) as spark:
        # class loading and JIT, at full speed where the limit can be lifted (as the gates prime their jobs)
        for _ in range(2):
            reference_job(spark, next(offsets) * rows, rows)
        if not limited_from_start:
            spark_cluster.limit_instances(cpu)
        runs, cpu_per_row = [], []
        for _ in range(repeats):
            before = spark_cluster.instance_cpu_seconds()
            runs.append(reference_job(spark, next(offsets) * rows, rows))
            after = spark_cluster.instance_cpu_seconds()
            if before is not None and after is not None:
                cpu_per_row.append((after - before) / rows * 1e6)
    best = max(runs)
    return Calibration(best, (best - min(runs)) / best, cpu, min(cpu_per_row) if cpu_per_row else None)


#: what a calibration stored between runs keeps (not whether it was itself reused)
_STORED_FIELDS = tuple(f.name for f in fields(Calibration) if f.name != "reused_after_s")
#: a stored calibration is reused by later runs up to this age (seconds). One session already judges its last
#: point against a calibration taken before its first -- about 14 minutes for the four shipped gates -- so a
#: calibration that old is what a long run relies on anyway; 0 measures it in every run
DEFAULT_MAX_AGE_S = 900.0


def calibration_key(testbed: Mapping[str, Any], limited: bool) -> str:
    """What makes two runs' calibrations interchangeable: this host, its cores and memory, the Spark cluster
    (kind or URL), pyspark, Python, the facts a conftest adds, whether the instances are CPU-limited, and the
    reference job's own size. The Kafka provider does not enter: the reference job reads no Kafka."""
    identity = {
        "host": platform.node(),
        **{key: testbed.get(key) for key in ("cores", "memory_gib", "spark_master", "pyspark_version")},
        "python": platform.python_version(),
        "extra": dict(testbed.get("extra") or {}),
        "limited": limited,
        "reference": [REFERENCE_CPU, REFERENCE_ROWS, REFERENCE_REPEATS],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def calibrate_or_reuse(
    spark_cluster: Any, testbed: Mapping[str, Any], cache_dir: Path, max_age_s: float
) -> Calibration:
    """This testbed's calibration stored by an earlier run at most `max_age_s` ago, else a new one (stored for
    the next run)."""
    key = calibration_key(testbed, spark_cluster.limits_instance_cpu)
    found = recent_calibration(cache_dir, key, max_age_s, time.time())
    if found is not None:
        stored, age = found
        try:
            return replace(Calibration(**{name: stored[name] for name in _STORED_FIELDS}), reused_after_s=age)
        except (KeyError, TypeError):
            pass  # written by another version: measure afresh
    measured = calibrate(spark_cluster)
    stored_fields = {name: value for name, value in asdict(measured).items() if name in _STORED_FIELDS}
    remember_calibration(cache_dir, key, stored_fields, time.time())
    return measured


def baseline_reference_cpu(baseline: Any) -> float | None:
    """The CPU the reference job ran on where `baseline` (a store.baseline.Baseline) was calibrated: as recorded;
    for a baseline that did not record it, REFERENCE_CPU where its instances were limited, else whole cores (None)
    -- which misread a baseline of unlimited instances calibrated on a cluster that can limit them."""
    if baseline.testbed.calibration_cpu_recorded:
        return baseline.testbed.calibration_instance_cpu
    return REFERENCE_CPU if baseline.testbed.instance_cpu is not None else None


def speed_ratio(
    baseline_rows_per_s: float | None,
    measured: Calibration | None,
    baseline_cpu: float | None = REFERENCE_CPU,
) -> float | None:
    """This testbed's calibration over the baseline's (0.57: it runs the reference job at 0.57x), or None where
    the two cannot be ordered (one is missing, or they ran on different CPU limits)."""
    if baseline_rows_per_s is None or measured is None or baseline_cpu != measured.instance_cpu:
        return None
    return measured.rows_per_s / baseline_rows_per_s


def calibration_mismatch(
    baseline_rows_per_s: float | None,
    measured: Calibration | None,
    baseline_cpu: float | None = REFERENCE_CPU,
    margin: float = DEFAULT_MARGIN,
) -> str | None:
    """Why a baseline is not comparable with this run's testbed, or None where it is (or cannot be told)."""
    if baseline_rows_per_s is None or measured is None:
        return None
    if baseline_cpu != measured.instance_cpu:
        return (
            f"the baseline's calibration ran on {baseline_cpu} CPU per instance, this run's on "
            f"{measured.instance_cpu}: re-record the baseline on this testbed"
        )
    ratio = measured.rows_per_s / baseline_rows_per_s
    if abs(ratio - 1) <= margin:
        return None
    # the direction, unlike the size, is beyond the calibration's noise: comparison.one_sided_verdict
    what = (
        "a demand above the baseline's may be this host's, not the job's"
        if ratio < 1
        else "a demand at or below the baseline's may be this host's, not the job's"
    )
    return (
        f"this testbed runs the reference job at {ratio:.2f}x the baseline's speed "
        f"({measured.rows_per_s:,.0f} vs {baseline_rows_per_s:,.0f} rows/s), beyond the {margin:.0%} margin: "
        f"{what}; record a baseline on this testbed (--theodolite-update-baselines) or run where the baseline "
        "was recorded"
    )
