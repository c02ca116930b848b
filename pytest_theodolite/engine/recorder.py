"""One repetition's recorder: the runner hands it every sample, and it alone writes the raw series.

What the verdicts need is kept in memory (`RepetitionSamples`); the same rows go to the raw CSV files as they
are measured, so nothing measured is lost when a run breaks off and ``python -m pytest_theodolite analyse`` can
judge the files alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pytest_theodolite.core.contention import (
    SERIES_LIMITED_INSTANCE_CPU,
    HostUsage,
    host_usage,
    instance_series,
)
from pytest_theodolite.core.cost import SERIES_INPUT_RECORDS, SERIES_INSTANCE_CPU, cost_estimate
from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.records import (
    SERIES_BATCH_END,
    SERIES_BATCH_ID,
    SERIES_LATE_ROWS,
    SERIES_STATE_ROWS,
)
from pytest_theodolite.core.slo import GENERATOR_RATE, LAG_TREND
from pytest_theodolite.engine import monitor
from pytest_theodolite.engine.host_sampler import HOST_SERIES
from pytest_theodolite.store.results import ResultsWriter, SeriesWriter
from theodolite_generator import RateSample

#: the monitor's series, one file each from the repetition's start
SAMPLE_SERIES = (
    "input-rate",
    "processed-rate",
    "batch-duration",
    SERIES_BATCH_ID,
    SERIES_BATCH_END,
    SERIES_INSTANCE_CPU,
    SERIES_INPUT_RECORDS,
)


@dataclass
class RepetitionSamples:
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
        return host_usage(
            series,
            instance_cpu=series.get(SERIES_LIMITED_INSTANCE_CPU),
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

    @property
    def lag_series(self) -> TimeSeries:
        return TimeSeries.of(self.lag_t, self.lag)

    @property
    def batch_durations(self) -> TimeSeries:
        return TimeSeries.of(self.batch_t, self.batch_ms)

    @property
    def batch_ids(self) -> TimeSeries:
        return TimeSeries.of(self.ids_t, self.ids)

    @property
    def batch_ends(self) -> TimeSeries:
        return TimeSeries.of(self.ids_t, self.ends)


class RepetitionRecorder:
    """Receives one repetition's samples, keeps them for the verdicts and writes each series' raw file as it
    goes (use as a context manager: the files are closed however the run ends). Series that may stay empty (a
    stateless job's state rows, the host's processes, each instance group) get a file at their first value."""

    def __init__(
        self, writer: ResultsWriter, load: int, resources: int, repetition: int, *, instance_groups: int
    ) -> None:
        self._writer = writer
        self._key = (load, resources)
        self._repetition = repetition
        self.samples = RepetitionSamples()
        self._files: dict[str, SeriesWriter] = {}
        try:
            for name in (LAG_TREND, *SAMPLE_SERIES):
                self._files[name] = writer.open_series(load, resources, name, repetition)
            for name in (
                SERIES_STATE_ROWS,
                *HOST_SERIES,
                *(instance_series(i) for i in range(instance_groups)),
            ):
                self._files[name] = writer.open_series(load, resources, name, repetition, lazy=True)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RepetitionRecorder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for file in self._files.values():
            file.close()

    def lag_sample(self, sample: monitor.LagSample) -> None:
        """One tick of the monitor: the lag, the query's rates and its micro-batch."""
        kept, t = self.samples, sample.timestamp_s
        kept.lag_t.append(t)
        kept.lag.append(sample.lag)
        if sample.batch_duration_ms is not None:
            kept.batch_t.append(t)
            kept.batch_ms.append(sample.batch_duration_ms)
        if sample.batch_id is not None:
            kept.ids_t.append(t)
            kept.ids.append(sample.batch_id)
            kept.ends.append(float("nan") if sample.batch_end_s is None else sample.batch_end_s)
        self._files[LAG_TREND].append(t, sample.lag)
        for name, value in (
            ("input-rate", sample.input_rows_per_s),
            ("processed-rate", sample.processed_rows_per_s),
            ("batch-duration", sample.batch_duration_ms),
            (SERIES_BATCH_ID, sample.batch_id),
            (SERIES_BATCH_END, sample.batch_end_s),
            (SERIES_STATE_ROWS, sample.state_rows),
        ):
            if value is not None:
                self._files[name].append(t, value)

    def cost_sample(self, timestamp_s: float, instance_cpu_s: float, input_records: int) -> None:
        """The instances' CPU seconds and the records written to the input topic so far (smooth, unlike the
        processed offsets, which move by whole micro-batches)."""
        self.samples.cost_samples.append((timestamp_s, instance_cpu_s, input_records))
        self._files[SERIES_INSTANCE_CPU].append(timestamp_s, instance_cpu_s)
        self._files[SERIES_INPUT_RECORDS].append(timestamp_s, input_records)

    def host_sample(self, timestamp_s: float, values: Mapping[str, float], cores: int | None) -> None:
        """The host's cumulative CPU series at one tick (engine/host_sampler.py)."""
        for name, value in values.items():
            self.samples.host_series.setdefault(name, []).append((timestamp_s, value))
            self._files[name].append(timestamp_s, value)
        self.samples.host_cores = cores

    def measured_from(self, timestamp_s: float | None) -> None:
        """Where the protocol's measurement began (None: it never did)."""
        self.samples.measured_from_s = timestamp_s

    def late_rows(self, rows: Iterable[tuple[float, int]]) -> TimeSeries | None:
        """The rows the query dropped as late, per micro-batch, written whole; None where it dropped none."""
        rows = list(rows)
        if not rows:
            return None
        series = TimeSeries.of([t for t, _ in rows], [n for _, n in rows])
        self._writer.write_series(*self._key, SERIES_LATE_ROWS, self._repetition, series)
        return series

    def generator_rates(self, rates: Iterable[RateSample]) -> TimeSeries:
        """The rates the generator achieved, written whole once it stopped."""
        rates = list(rates)
        series = TimeSeries.of([s.epoch_s for s in rates], [s.records_per_s for s in rates])
        self._writer.write_series(*self._key, GENERATOR_RATE, self._repetition, series)
        return series


__all__ = ("RepetitionRecorder", "RepetitionSamples")
