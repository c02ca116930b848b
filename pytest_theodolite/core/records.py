"""What one sub-experiment and its repetitions came to, as typed records, and the names of the raw series
recorded beside them. Pure data: store/results.py writes and reads them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_theodolite.core.evaluation import combine_repetitions, combine_verdicts
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.protocol import CERTAIN_STOPS
from pytest_theodolite.core.scalability import SubExperiment
from pytest_theodolite.core.slo import LAG_TREND, SloVerdict

_CERTAIN_STOP_VALUES = frozenset(stop.value for stop in CERTAIN_STOPS)


SERIES_LAG = "lag-trend"  # Theodolite's name for the total-lag series


SERIES_GENERATOR_RATE = "generator-rate"


SERIES_INPUT_RATE = "input-rate"


SERIES_PROCESSED_RATE = "processed-rate"


SERIES_BATCH_DURATION = "batch-duration"


SERIES_EVENT_TIME_LATENCY = "event-time-latency"


SERIES_BATCH_ID = "batch-id"  # id of the last finished micro-batch at each lag sample (batch-aligned slope)


SERIES_BATCH_END = "batch-end"  # epoch seconds that batch finished


SERIES_STATE_ROWS = "state-rows"  # rows in the job's state stores after that batch (stateful jobs only)


SERIES_LATE_ROWS = "late-rows"  # rows a micro-batch dropped as late, at its end (stateful jobs only)


@dataclass(frozen=True)
class RepetitionRecord:
    """The SLO verdicts of one repetition; `counters` holds record counts such as records_total/_malformed."""

    repetition: int
    verdicts: tuple[SloVerdict, ...]
    counters: Mapping[str, int] = field(default_factory=dict)
    #: how the repetition was measured (protocol.MeasurementProtocol.summary): warm-up used, stop reason, ...
    protocol: Mapping[str, Any] = field(default_factory=dict)
    #: the instances' CPU per offered record with its interval (cost.CostEstimate.to_dict); empty: not read
    cost: Mapping[str, Any] = field(default_factory=dict)

    @property
    def certain(self) -> bool:
        """Whether its verdict was certain (protocol.MeasurementProtocol.certain). Results written before the
        protocol recorded it: from the stop reason; none recorded (a fixed protocol of old) counts as certain."""
        flag = self.protocol.get("certain")
        if flag is not None:
            return bool(flag)
        stop = self.protocol.get("stop")
        return stop is None or stop in _CERTAIN_STOP_VALUES

    @property
    def warmup_s(self) -> float | None:
        """The warm-up this repetition really used, if it recorded one."""
        value = self.protocol.get("warmup_s")
        return None if value is None else float(value)

    @property
    def outcome(self) -> Outcome:
        return combine_verdicts(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repetition": self.repetition,
            "outcome": self.outcome.value,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "counters": dict(self.counters),
            "protocol": json_safe(dict(self.protocol)),
            "cost": json_safe(dict(self.cost)),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RepetitionRecord:
        return cls(
            repetition=int(data["repetition"]),
            verdicts=tuple(SloVerdict.from_dict(v) for v in data["verdicts"]),
            counters={str(k): int(v) for k, v in data.get("counters", {}).items()},
            protocol=dict(data.get("protocol") or {}),
            cost=dict(data.get("cost") or {}),
        )


@dataclass(frozen=True)
class SubExperimentRecord:
    """One sub-experiment (load, resources) with its repetitions and the verdicts combined over them."""

    load: int
    resources: int
    target_rate: float | None
    repetitions: tuple[RepetitionRecord, ...]
    verdicts: tuple[SloVerdict, ...]

    @classmethod
    def from_repetitions(
        cls, load: int, resources: int, target_rate: float | None, repetitions: Sequence[RepetitionRecord]
    ) -> SubExperimentRecord:
        """Combine repetitions as Theodolite does: median slope for trends, other SLOs in every repetition."""
        combined = combine_repetitions([r.verdicts for r in repetitions])
        return cls(load, resources, target_rate, tuple(repetitions), combined)

    @property
    def outcome(self) -> Outcome:
        return combine_verdicts(self.verdicts)

    @property
    def certain(self) -> bool:
        """Whether every repetition's verdict was certain (see RepetitionRecord.certain) and they all reached
        the same outcome: repetitions of one (load, instances) that disagree, each certain by its own interval,
        show that run-to-run variation -- not the code -- decided between them."""
        return all(r.certain for r in self.repetitions) and len({r.outcome for r in self.repetitions}) <= 1

    @property
    def lag_trend_slope(self) -> float | None:
        """The deciding lag slope (median over repetitions), None if it could not be computed."""
        return next((v.value for v in self.verdicts if v.name == LAG_TREND), None)

    @property
    def cpu_us_per_record(self) -> float | None:
        """CPU microseconds the instances spent per offered record while measuring (mean over the
        repetitions that recorded it); None where the instances' CPU could not be read."""
        costs = [
            r.counters["instance_cpu_ms"] * 1000 / r.counters["records_measured"]
            for r in self.repetitions
            if r.counters.get("records_measured") and "instance_cpu_ms" in r.counters
        ]
        return sum(costs) / len(costs) if costs else None

    def as_sub_experiment(self) -> SubExperiment:
        return SubExperiment(self.load, self.resources, self.outcome)

    def to_dict(self) -> dict[str, Any]:
        slope = self.lag_trend_slope
        return {
            "load": self.load,
            "resources": self.resources,
            "target_rate": self.target_rate,
            "outcome": self.outcome.value,
            "lag_trend_slope": slope if slope is not None and np.isfinite(slope) else None,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "repetitions": [r.to_dict() for r in self.repetitions],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SubExperimentRecord:
        target = data.get("target_rate")
        return cls(
            load=int(data["load"]),
            resources=int(data["resources"]),
            target_rate=None if target is None else float(target),
            repetitions=tuple(RepetitionRecord.from_dict(r) for r in data["repetitions"]),
            verdicts=tuple(SloVerdict.from_dict(v) for v in data["verdicts"]),
        )


def json_safe(value: Any) -> Any:
    """Non-finite floats (not valid JSON) become their text, e.g. 'inf', so a setting never breaks the write."""
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value
