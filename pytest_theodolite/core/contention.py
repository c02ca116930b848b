"""Host limits against job limits: did the instances get the CPU they were given, and who took the rest?

A gate gives each instance a CPU quota and asks whether r instances keep up with a load. On a shared host
(a CI runner, or the 2-core testbed where the broker, the generator and the Spark driver run beside the
instances) the instances can fall behind because the host had no CPU left for them, not because the job needs
more instances. From the moment the instances' CPU limit applies (the settling that may already decide a FAIL, and
the measurement) the runner records, as cumulative series, the CPU seconds of the host's cores, of the
instances (their cgroups), of the broker, the generator and the driver, and how many of the quota's
enforcement periods held the instances back (throttled). From those:

* the instances' share of their quota, and the busiest instance's share of its own -- near 1 when a job that
  falls behind is limited by its quota (its own limit: more instances are what it needs; where its partitions
  spread unevenly over the instances, only the busiest one is held at its quota while the others wait);
* the host's busy share, and what the broker, generator, driver and everything else took of it.

``check_instance_quota`` makes a lag-trend FAIL INVALID -- unmeasured, never a FAIL -- when even the busiest
instance got less than ``STARVED_SHARE`` of its quota while the host had no idle CPU (at least
``HOST_BUSY_SHARE`` of its cores busy): such a run measured the host. A PASS stays a PASS (the job kept up
with less than it was given). Instances without a CPU quota have no share they were owed: their usage is
reported, never judged.

Pure functions over data: the series come from the results files as well as from a running measurement.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.slo import SloVerdict

#: the name of the check among a repetition's verdicts
INSTANCE_QUOTA = "instance-quota"

#: cumulative series from the instances' CPU limit on (seconds of CPU, or counts of quota periods)
SERIES_HOST_BUSY = "host-busy-cpu"
#: the instances' CPU seconds from the limit on (cost.py's instance-cpu is written while measuring only)
SERIES_LIMITED_INSTANCE_CPU = "limited-instance-cpu"
SERIES_BROKER_CPU = "broker-cpu"
SERIES_GENERATOR_CPU = "generator-cpu"
SERIES_DRIVER_CPU = "driver-cpu"
SERIES_QUOTA_PERIODS = "instance-quota-periods"
SERIES_THROTTLED_PERIODS = "instance-throttled-periods"


def instance_series(index: int) -> str:
    """The series of one instance's CPU seconds (its cgroup's), by the cluster's group order."""
    return f"{SERIES_LIMITED_INSTANCE_CPU}-{index}"


#: the processes whose CPU is recorded besides the instances', in the order reports list them
ROLE_SERIES: Mapping[str, str] = {
    "broker": SERIES_BROKER_CPU,
    "generator": SERIES_GENERATOR_CPU,
    "driver": SERIES_DRIVER_CPU,
}

#: below this share of its quota, the busiest instance of a job that fell behind did not get what it was given
STARVED_SHARE = 0.85
#: where the host's cores were at least this busy (the busiest instance of a job that falls behind on a quiet
#: host used 92-98 % of its quota; starved by other processes, 61-77 %: docs/lab-notes/contention.md)
HOST_BUSY_SHARE = 0.95


@dataclass(frozen=True)
class HostUsage:
    """CPU over one measurement window, in cores (CPU seconds per second of wall time)."""

    window_s: float
    host_cores: int
    host_busy_cores: float
    instance_cores: float | None  # None: the instances' CPU could not be read
    #: the instances' quota in cores (instances x CPU per instance); None: no quota (whole cores)
    quota_cores: float | None
    #: cores each of the named processes took ("broker", "generator", "driver"); a role missing: not read
    roles: Mapping[str, float] = field(default_factory=dict)
    #: share of the quota's enforcement periods in which the instances were held back; None: not read
    throttled_share: float | None = None
    #: the cores the busiest instance took and its own quota; None: not read (or no quota)
    busiest_instance_cores: float | None = None
    instance_quota_cores: float | None = None

    @property
    def host_busy_share(self) -> float:
        return self.host_busy_cores / self.host_cores if self.host_cores else float("nan")

    @property
    def quota_share(self) -> float | None:
        """The instances' CPU over their quota; None without a quota or a reading."""
        if self.quota_cores is None or self.instance_cores is None or not self.quota_cores > 0:
            return None
        return self.instance_cores / self.quota_cores

    @property
    def busiest_share(self) -> float | None:
        """The busiest instance's CPU over its own quota; else, where not read, the instances' together."""
        if self.busiest_instance_cores is None or not (self.instance_quota_cores or 0) > 0:
            return self.quota_share
        assert self.instance_quota_cores is not None
        return self.busiest_instance_cores / self.instance_quota_cores

    @property
    def other_cores(self) -> float:
        """What the host's busy cores spent on neither the instances nor the named processes: other tenants,
        other tests, the hypervisor's steal."""
        ours = (self.instance_cores or 0.0) + sum(self.roles.values())
        return max(0.0, self.host_busy_cores - ours)

    def describe(self) -> str:
        parts = []
        if self.instance_cores is not None:
            if self.quota_cores is not None and (share := self.quota_share) is not None:
                throttled = (
                    ""
                    if self.throttled_share is None
                    else f", held at it in {self.throttled_share:.0%} of periods"
                )
                busiest = (
                    ""
                    if self.busiest_instance_cores is None or self.instance_quota_cores is None
                    else f", the busiest {self.busiest_share:.0%} of its {self.instance_quota_cores:g}"
                )
                parts.append(
                    f"instances {self.instance_cores:.2f} of their {self.quota_cores:.2f}-core quota "
                    f"({share:.0%}{busiest}{throttled})"
                )
            else:
                parts.append(f"instances {self.instance_cores:.2f} cores (no quota)")
        parts.extend(f"{role} {cores:.2f}" for role, cores in self.roles.items())
        parts.append(f"others {self.other_cores:.2f}")
        return (
            f"host {self.host_busy_share:.0%} busy of {self.host_cores} cores: " + ", ".join(parts) + " cores"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_s": round(self.window_s, 3),
            "host_cores": self.host_cores,
            "host_busy_cores": round(self.host_busy_cores, 4),
            "instance_cores": None if self.instance_cores is None else round(self.instance_cores, 4),
            "quota_cores": self.quota_cores,
            "roles": {k: round(v, 4) for k, v in self.roles.items()},
            "throttled_share": _rounded(self.throttled_share),
            "busiest_instance_cores": _rounded(self.busiest_instance_cores),
            "instance_quota_cores": self.instance_quota_cores,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostUsage:
        return cls(
            window_s=float(data["window_s"]),
            host_cores=int(data["host_cores"]),
            host_busy_cores=float(data["host_busy_cores"]),
            instance_cores=None if data.get("instance_cores") is None else float(data["instance_cores"]),
            quota_cores=None if data.get("quota_cores") is None else float(data["quota_cores"]),
            roles={k: float(v) for k, v in (data.get("roles") or {}).items()},
            throttled_share=_float_or_none(data.get("throttled_share")),
            busiest_instance_cores=_float_or_none(data.get("busiest_instance_cores")),
            instance_quota_cores=_float_or_none(data.get("instance_quota_cores")),
        )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _rise(series: TimeSeries | None, start_s: float, end_s: float) -> float | None:
    """How much a cumulative series rose between the samples nearest `start_s` and `end_s` (within it)."""
    if series is None or len(series) < 2:
        return None
    t, v = series.timestamps_s, series.values
    inside = (t >= start_s) & (t <= end_s)
    if inside.sum() < 2:
        return None
    first, last = np.flatnonzero(inside)[[0, -1]]
    return float(v[last] - v[first])


def host_usage(
    series: Mapping[str, TimeSeries | None],
    *,
    instance_cpu: TimeSeries | None,
    host_cores: int,
    quota_cores: float | None,
    instance_quota_cores: float | None = None,
    start_s: float | None = None,
) -> HostUsage | None:
    """The window's usage from the cumulative series (``SERIES_*`` names, ``instance_series`` per instance,
    and the instances' CPU seconds), from `start_s` (epoch seconds; None: the host series' first sample) to
    the host series' last sample. `instance_quota_cores`: one instance's quota. None where the host's own
    series has fewer than two samples in the window."""
    host = series.get(SERIES_HOST_BUSY)
    if host is None or len(host) < 2 or host_cores < 1:
        return None
    start = float(host.timestamps_s[0]) if start_s is None else start_s
    end = float(host.timestamps_s[-1])
    inside = host.timestamps_s[(host.timestamps_s >= start) & (host.timestamps_s <= end)]
    if inside.size < 2 or not inside[-1] > inside[0]:
        return None
    window = float(inside[-1] - inside[0])
    busy = _rise(host, start, end)
    assert busy is not None
    instances = _rise(instance_cpu, start, end)
    roles = {
        role: rise / window
        for role, name in ROLE_SERIES.items()
        if (rise := _rise(series.get(name), start, end)) is not None
    }
    each = []
    for index in itertools.count():
        if instance_series(index) not in series:
            break
        if (rise := _rise(series[instance_series(index)], start, end)) is not None:
            each.append(rise)
    periods = _rise(series.get(SERIES_QUOTA_PERIODS), start, end)
    throttled = _rise(series.get(SERIES_THROTTLED_PERIODS), start, end)
    return HostUsage(
        window_s=window,
        host_cores=host_cores,
        host_busy_cores=busy / window,
        instance_cores=None if instances is None else instances / window,
        quota_cores=quota_cores,
        roles=roles,
        throttled_share=None
        if periods is None or throttled is None or not periods > 0
        else throttled / periods,
        busiest_instance_cores=max(each) / window if each and instance_quota_cores is not None else None,
        instance_quota_cores=instance_quota_cores,
    )


def check_instance_quota(
    usage: HostUsage,
    lag_outcome: Outcome,
    *,
    starved_share: float = STARVED_SHARE,
    busy_share: float = HOST_BUSY_SHARE,
) -> SloVerdict | None:
    """INVALID where the lag trend FAILed while even the busiest instance got less than `starved_share` of its
    quota and the host had no idle CPU; PASS otherwise. None where nothing can be judged: no quota (whole-core
    instances) or the instances' CPU was not read."""
    share = usage.busiest_share
    if share is None:
        return None
    starved = share < starved_share and usage.host_busy_share >= busy_share
    if starved and lag_outcome is Outcome.FAIL:
        return SloVerdict(
            INSTANCE_QUOTA,
            Outcome.INVALID,
            share,
            starved_share,
            f"host-limited: the instances fell behind, the busiest with {share:.0%} of its CPU quota, while the "
            "host had "
            f"no idle CPU ({usage.describe()}): this run measured the host, not the job; free the host "
            "(fewer parallel workers, nothing else running) or run where the instances get their quota",
        )
    if starved:
        why = "they kept up with less than their quota on a busy host"
    elif lag_outcome is Outcome.FAIL and share < starved_share:
        why = "the host had idle CPU: what held the job back was its own (its driver, its per-batch work)"
    else:
        why = "they got their quota"
    return SloVerdict(INSTANCE_QUOTA, Outcome.PASS, share, starved_share, f"{why} ({usage.describe()})")


#: a lag sampler whose median gap is this many times its interval says so: the host measuring is the limit
SLOW_SAMPLING_FACTOR = 1.5


@dataclass(frozen=True)
class SlowSampling:
    """The lag was sampled markedly less often than asked: the pytest host, or its link to a cluster, could
    not keep the sampler's pace (the fit then has fewer points; nothing about the job follows from it)."""

    interval_s: float
    median_gap_s: float
    max_gap_s: float

    @classmethod
    def of(cls, timestamps_s: list[float], interval_s: float) -> SlowSampling | None:
        """None where the median gap between samples stayed within SLOW_SAMPLING_FACTOR x `interval_s`."""
        if len(timestamps_s) < 3 or interval_s <= 0:
            return None
        gaps = np.diff(np.asarray(timestamps_s, dtype=float))
        median = float(np.median(gaps))
        if median <= SLOW_SAMPLING_FACTOR * interval_s:
            return None
        return cls(interval_s, round(median, 2), round(float(gaps.max()), 2))

    def to_dict(self) -> dict[str, float]:
        return {"interval_s": self.interval_s, "median_gap_s": self.median_gap_s, "max_gap_s": self.max_gap_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SlowSampling:
        return cls(float(data["interval_s"]), float(data["median_gap_s"]), float(data["max_gap_s"]))

    def describe(self) -> str:
        return (
            f"lag sampled every {self.median_gap_s:.1f} s (longest gap {self.max_gap_s:.0f} s), not every "
            f"{self.interval_s:g} s: this host, or its link to the cluster, is slow"
        )
