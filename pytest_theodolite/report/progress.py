"""One line per finished sub-experiment, for people watching a CI log."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_theodolite.core.contention import HostUsage, SlowSampling
from pytest_theodolite.core.slo import LAG_TREND, LATE_RECORDS


def progress_line(record: Any, timings: Mapping[Any, Any]) -> str:
    """One finished sub-experiment, for users watching a CI log: verdicts, the lag slope with its interval,
    and how it was measured (priming, the warm-up really used, measurement length and why it stopped)."""
    slos = ", ".join(f"{v.name} {v.outcome.value}" for v in record.verdicts)
    lag = next((v for v in record.verdicts if v.name == LAG_TREND), None)
    trend = ""
    if lag is not None and lag.value is not None and lag.threshold is not None:
        interval = "" if lag.low is None or lag.high is None else f" [{lag.low:.0f}, {lag.high:.0f}]"
        median = " (median)" if len(record.repetitions) > 1 else ""
        # a median over a FAIL without a slope (falling behind, no steady state) is an unbounded lag
        slope = f"{lag.value:.0f}" if math.isfinite(lag.value) else "unbounded"
        trend = f"; lag slope {slope}{interval}{median} vs {lag.threshold:.0f} records/s"
    late = next((v for v in record.verdicts if v.name == LATE_RECORDS), None)
    if late is not None:  # how many, beside the lag: a job can keep up by dropping what comes too late
        trend += f"; {late.detail}"
    if len(record.repetitions) > 1:  # e.g. a regression's deciding verdict, measured once more
        each = ", ".join(r.outcome.value.upper() for r in record.repetitions)
        trend += f"; {len(record.repetitions)} repetitions: {each}"
    last_repetition = record.repetitions[-1] if record.repetitions else None
    protocol = last_repetition.protocol if last_repetition is not None else {}
    last = timings.get((record.load, record.resources, len(record.repetitions) - 1))
    phases = ""
    if last is not None:
        primed = protocol.get("primed_s")
        primed_text = "" if primed is None else f" (primed {primed:.0f} s unlimited)"
        stop = protocol.get("stop")
        phases = (
            f" [setup {last.setup_s:.0f} s, warm-up {last.warmup_s:.0f} s{primed_text}, "
            f"measured {last.measurement_s:.0f} s{'' if stop is None else f' until {stop}'}, "
            f"teardown {last.teardown_s:.0f} s]"
        )
    host = protocol.get("host")
    if host:  # where the host's CPU went from the CPU limit on: a FAIL the host caused is not the job's
        phases += f" [{HostUsage.from_dict(host).describe()}]"
    sampling = protocol.get("sampling")
    if sampling:  # the sampler could not keep its pace: the host measuring, not the job, was slow
        phases += f" [{SlowSampling.from_dict(sampling).describe()}]"
    return (
        f"load={record.load} instances={record.resources}: {record.outcome.value.upper()} ({slos}{trend})"
        f"{phases}"
    )
