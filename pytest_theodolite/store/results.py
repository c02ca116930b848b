"""Raw results written as they are measured, and read back into the same dataclasses.

One results directory holds, per experiment id (no '_' in it, since '_' separates the name's fields):

- `exp<id>_<load>_<resources>_<series>_<rep>.csv`, columns `labels,timestamp,value` (epoch seconds), one per
  sub-experiment, repetition and series: Theodolite's own file shape, which its analysis reads by position
  (column 1 the timestamp, column 2 the value). `lag-trend` is the total lag (records);
  the others are `generator-rate`, `input-rate`, `processed-rate` (records/s), `batch-duration` (ms),
  `batch-id` (the last finished micro-batch at each lag sample), `batch-end` (epoch seconds it finished) and
  `event-time-latency` (s). Rows are flushed as they are appended, so a crash loses at most the row in flight.
- `exp<id>_results.json`: every setting (secrets redacted), the SLO settings, the environment, and every
  finished sub-experiment's verdicts per repetition and combined, plus the demand/capacity result once known.
  It is rewritten atomically after each sub-experiment, so it always holds everything finished so far.
- `exp<id>_demand.csv` (`load,resources`) or `exp<id>_capacity.csv` (`resource,loads`): the optimum, `none`
  where nothing passed, `unmeasured` where an INVALID/ERRORED sub-experiment left it unjudged.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TextIO

import numpy as np
import pandas as pd

from pytest_theodolite.core.estimators import TimeSeries
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import SERIES_LAG, SubExperimentRecord, json_safe
from pytest_theodolite.core.redaction import redact_secrets
from pytest_theodolite.core.scalability import CapacityResult, DemandResult, Metric, SubExperiment
from pytest_theodolite.store.environment import environment_info

FORMAT_VERSION = 2  # 2: raw CSVs in Theodolite's `labels,timestamp,value` shape (1: `timestamp,value`)
SERIES_COLUMNS = (
    "labels,timestamp,value"  # Theodolite's collector's columns, read by position by its analysis
)

_EXPERIMENT_ID = r"[A-Za-z0-9][A-Za-z0-9.-]*"
_SERIES_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
RAW_FILE = re.compile(
    rf"^exp(?P<experiment>{_EXPERIMENT_ID})_(?P<load>\d+)_(?P<resources>\d+)_(?P<series>[a-z][a-z0-9-]*)"
    r"_(?P<repetition>\d+)\.csv$"
)
RESULTS_JSON = re.compile(rf"^exp(?P<experiment>{_EXPERIMENT_ID})_results\.json$")


class ResultsError(ValueError):
    """A results directory or file that cannot be read as results; the message says what is wrong."""


# ------------------------------------------------------------------------------------------------------------
# Records
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class RawSeriesKey:
    load: int
    resources: int
    series: str
    repetition: int


@dataclass(frozen=True)
class ExperimentResults:
    """Everything a results directory holds about one experiment."""

    experiment_id: str
    metric: Metric | None
    slo_settings: SloSettings
    settings: Mapping[str, Any]
    environment: Mapping[str, Any]
    loads: tuple[int, ...]
    resources: tuple[int, ...]
    sub_experiments: tuple[SubExperimentRecord, ...]
    demand: DemandResult | None
    capacity: CapacityResult | None
    raw_series: Mapping[RawSeriesKey, Path]
    #: the capacity strategy's measurements as recorded (engine/capacity_probe.CapacityMeasurement.to_dict)
    capacity_measurements: tuple[Mapping[str, Any], ...] = ()

    def series_path(self, load: int, resources: int, series: str, repetition: int) -> Path | None:
        return self.raw_series.get(RawSeriesKey(load, resources, series, repetition))

    def repetitions_of(self, load: int, resources: int) -> tuple[int, ...]:
        """Repetition numbers with a lag-trend file for (load, resources)."""
        return tuple(
            sorted(
                k.repetition
                for k in self.raw_series
                if (k.load, k.resources, k.series) == (load, resources, SERIES_LAG)
            )
        )

    def points_with_lag(self) -> tuple[tuple[int, int], ...]:
        """(load, resources) of every sub-experiment with a lag-trend file, ascending."""
        return tuple(sorted({(k.load, k.resources) for k in self.raw_series if k.series == SERIES_LAG}))


# ------------------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------------------


def _check_experiment_id(experiment_id: str | int) -> str:
    text = str(experiment_id)
    if not re.fullmatch(_EXPERIMENT_ID, text):
        raise ValueError(
            f"experiment id {text!r} must be letters, digits, '.' or '-'"
            " (no '_': it separates file-name fields)"
        )
    return text


def series_file_name(
    experiment_id: str | int, load: int, resources: int, series: str, repetition: int
) -> str:
    if not _SERIES_NAME.match(series):
        raise ValueError(
            f"series name {series!r} must be lower-case letters, digits and '-', e.g. 'input-rate'"
        )
    for name, number in (("load", load), ("resources", resources), ("repetition", repetition)):
        if isinstance(number, bool) or not isinstance(number, (int, np.integer)) or number < 0:
            raise ValueError(f"{name} must be an integer >= 0 for a file name, got {number!r}")
    return f"exp{_check_experiment_id(experiment_id)}_{load}_{resources}_{series}_{repetition}.csv"


def _format_number(value: float) -> str:
    return format(float(value), ".17g")  # round-trips exactly; integers stay '12345'


def series_labels(series: str) -> str:
    """The `labels` cell of a raw CSV: a label set in the form Theodolite's collector writes (one label, so
    no comma and no CSV quoting)."""
    return f"{{series={series}}}"


class SeriesWriter:
    """Appends `labels,timestamp,value` rows to one raw CSV (Theodolite's shape), flushing each row so
    nothing measured is lost."""

    def __init__(self, path: Path, labels: str, *, lazy: bool = False) -> None:
        """``lazy``: create the file at the first row, so a series that never gets a value leaves no file."""
        if any(c in labels for c in ',"\n'):
            raise ValueError(f"labels {labels!r} must not contain ',', '\"' or a newline")
        self.path = path
        self._labels = labels
        self._file: TextIO | None = None
        self._closed = False
        if not lazy:
            self._open()

    def _open(self) -> TextIO:
        self._file = open(self.path, "w", encoding="utf-8", newline="")
        self._file.write(f"{SERIES_COLUMNS}\n")
        self._file.flush()
        return self._file

    def append(self, timestamp_s: float, value: float) -> None:
        if self._closed:
            raise ValueError(f"{self.path.name} is closed: open a new writer to record more")
        file = self._file if self._file is not None else self._open()
        file.write(f"{self._labels},{_format_number(timestamp_s)},{_format_number(value)}\n")
        file.flush()

    def close(self) -> None:
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def write_atomically(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
            file.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultsWriter:
    """Writes one experiment's results into `results_dir` as they are measured.

    The JSON is written on construction (settings first, so a crash still leaves them) and rewritten after
    every `record_sub_experiment` / `write_demand` / `write_capacity`.
    """

    def __init__(
        self,
        results_dir: str | os.PathLike[str],
        experiment_id: str | int,
        *,
        metric: Metric,
        slo_settings: SloSettings,
        settings: Mapping[str, Any] | None = None,
        loads: Sequence[int] = (),
        resources: Sequence[int] = (),
        environment: Mapping[str, Any] | None = None,
    ) -> None:
        self.results_dir = Path(results_dir)
        self.experiment_id = _check_experiment_id(experiment_id)
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self._document: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "experiment_id": self.experiment_id,
            "metric": Metric(metric).value,
            "slo": slo_settings.to_dict(),
            "settings": json_safe(redact_secrets(dict(settings or {}))),
            "environment": json_safe(
                redact_secrets(dict(environment if environment is not None else environment_info()))
            ),
            "loads": [int(x) for x in loads],
            "resources": [int(x) for x in resources],
            "sub_experiments": [],
            "capacity_measurements": [],
            "demand": None,
            "capacity": None,
        }
        self._save()

    @property
    def json_path(self) -> Path:
        return self.results_dir / f"exp{self.experiment_id}_results.json"

    def series_path(self, load: int, resources: int, series: str, repetition: int) -> Path:
        return self.results_dir / series_file_name(self.experiment_id, load, resources, series, repetition)

    def open_series(
        self, load: int, resources: int, series: str, repetition: int, *, lazy: bool = False
    ) -> SeriesWriter:
        """A writer to append samples as the monitor takes them (use as a context manager); ``lazy`` creates
        the file at the first sample."""
        return SeriesWriter(
            self.series_path(load, resources, series, repetition), series_labels(series), lazy=lazy
        )

    def write_series(self, load: int, resources: int, series: str, repetition: int, data: TimeSeries) -> Path:
        """Write a whole recorded series at once."""
        with self.open_series(load, resources, series, repetition) as writer:
            for timestamp, value in zip(data.timestamps_s, data.values, strict=True):
                writer.append(timestamp, value)
        return writer.path

    def record_sub_experiment(self, record: SubExperimentRecord) -> None:
        """Add (or replace, if re-run) a finished sub-experiment's verdicts and save the JSON."""
        entries = [
            e
            for e in self._document["sub_experiments"]
            if (e["load"], e["resources"]) != (record.load, record.resources)
        ]
        entries.append(record.to_dict())
        self._document["sub_experiments"] = entries
        self._save()

    def write_demand(self, result: DemandResult) -> Path:
        """`exp<id>_demand.csv` (load,resources) and the JSON's demand section; may be called per load."""
        xs = sorted(set(result.demand) | set(result.unmeasured))
        path = self.results_dir / f"exp{self.experiment_id}_demand.csv"
        write_atomically(path, "load,resources\n" + "".join(f"{x},{result.status(x)}\n" for x in xs))
        self._document["demand"] = _function_to_dict(result, result.demand)
        self._save()
        return path

    def write_capacity(self, result: CapacityResult) -> Path:
        """`exp<id>_capacity.csv` (resource,loads) and the capacity section of the JSON."""
        xs = sorted(set(result.capacity) | set(result.unmeasured))
        path = self.results_dir / f"exp{self.experiment_id}_capacity.csv"
        write_atomically(path, "resource,loads\n" + "".join(f"{x},{result.status(x)}\n" for x in xs))
        self._document["capacity"] = _function_to_dict(result, result.capacity)
        self._save()
        return path

    def record_capacity_measurement(self, measurement: Mapping[str, Any]) -> None:
        """Add (or replace, if re-run) a capacity measurement of an instance count and save the JSON; a
        measurement repeated at another rate or batch size (its ``attempt``) is kept beside the first."""

        def key(entry: Mapping[str, Any]) -> tuple[int, int]:
            return int(entry["instances"]), int(entry.get("attempt", 0))

        entries = [e for e in self._document["capacity_measurements"] if key(e) != key(measurement)]
        entries.append(dict(measurement))
        self._document["capacity_measurements"] = sorted(entries, key=key)
        self._save()

    def _save(self) -> None:
        # default=str: settings may hold Paths or enums; they are kept readable rather than rejected.
        write_atomically(
            self.json_path, json.dumps(self._document, indent=2, default=str, allow_nan=False) + "\n"
        )


def _function_to_dict(
    result: DemandResult | CapacityResult, optimum: Mapping[int, int | None]
) -> dict[str, Any]:
    return {
        "strategy": result.strategy,
        "optimum": [[x, y] for x, y in sorted(optimum.items())],
        "unmeasured": list(result.unmeasured),
        "skipped": list(result.skipped),
        **({"at_most": list(result.at_most)} if isinstance(result, DemandResult) else {}),
        # loads that failed below their demand, which was not run (the demand is at least that)
        **(
            {"at_least": list(result.at_least)}
            if isinstance(result, DemandResult) and result.at_least
            else {}
        ),
        # load -> the most instances that failed there, more not run (the demand is higher)
        **(
            {"above": [[x, y] for x, y in sorted(result.above.items())]}
            if isinstance(result, DemandResult)
            else {}
        ),
        "loads": list(result.loads),
        "resources": list(result.resources),
        "sub_experiments": [[s.load, s.resources, s.outcome.value] for s in result.sub_experiments],
    }


def _function_from_dict(data: Mapping[str, Any], metric: Metric) -> DemandResult | CapacityResult:
    optimum = {int(x): None if y is None else int(y) for x, y in data["optimum"]}
    common = {
        "unmeasured": tuple(int(x) for x in data.get("unmeasured", ())),
        "skipped": tuple(int(x) for x in data.get("skipped", ())),
        "sub_experiments": tuple(
            SubExperiment(int(l), int(r), Outcome(o)) for l, r, o in data.get("sub_experiments", ())
        ),
        "strategy": str(data.get("strategy", "")),
        "loads": tuple(int(x) for x in data.get("loads", ())),
        "resources": tuple(int(x) for x in data.get("resources", ())),
    }
    if metric is Metric.DEMAND:
        at_most = tuple(int(x) for x in data.get("at_most", ()))
        above = {int(x): int(y) for x, y in data.get("above", ())}
        at_least = tuple(int(x) for x in data.get("at_least", ()))
        return DemandResult(demand=optimum, at_most=at_most, above=above, at_least=at_least, **common)  # type: ignore[arg-type]
    return CapacityResult(capacity=optimum, **common)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------------------


def read_series(path: str | os.PathLike[str]) -> TimeSeries:
    """A raw CSV as a TimeSeries: `labels,timestamp,value` (written since format 2), the `timestamp,value` of
    older results, or Theodolite's own files (`labels` or `group` first); columns are found by name."""
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ResultsError(f"{path.name} is empty: expected a header '{SERIES_COLUMNS}'") from None
    missing = {"timestamp", "value"} - set(frame.columns)
    if missing:
        raise ResultsError(f"{path.name} lacks column(s) {sorted(missing)}: expected '{SERIES_COLUMNS}'")
    if len(frame) and frame.iloc[-1][["timestamp", "value"]].isna().any():
        frame = frame.iloc[:-1]  # a row cut short by a crash while it was being written
    try:
        return TimeSeries.of(
            frame["timestamp"].astype(float).to_numpy(), frame["value"].astype(float).to_numpy()
        )
    except ValueError as error:
        raise ResultsError(f"{path.name}: non-numeric timestamp or value ({error})") from None


def list_experiment_ids(results_dir: str | os.PathLike[str]) -> tuple[str, ...]:
    """Experiment ids with raw series or a results JSON in `results_dir`."""
    ids = set()
    for entry in Path(results_dir).iterdir():
        match = RAW_FILE.match(entry.name) or RESULTS_JSON.match(entry.name)
        if match:
            ids.add(match.group("experiment"))
    return tuple(sorted(ids))


def _raw_series(results_dir: Path, experiment_id: str) -> dict[RawSeriesKey, Path]:
    found = {}
    for entry in results_dir.iterdir():
        match = RAW_FILE.match(entry.name)
        if match and match.group("experiment") == experiment_id:
            key = RawSeriesKey(
                int(match.group("load")),
                int(match.group("resources")),
                match.group("series"),
                int(match.group("repetition")),
            )
            found[key] = entry
    return dict(sorted(found.items()))


def read_results(
    results_dir: str | os.PathLike[str], experiment_id: str | int | None = None
) -> ExperimentResults:
    """Load a results directory back into dataclasses (raw series indexed by path; see `read_series`).

    With several experiments in the directory, `experiment_id` must say which one.
    """
    directory = Path(results_dir)
    if not directory.is_dir():
        raise ResultsError(f"results directory {str(directory)!r} does not exist or is not a directory")
    ids = list_experiment_ids(directory)
    if experiment_id is None:
        if not ids:
            raise ResultsError(
                f"no results in {str(directory)!r}:"
                " expected files like exp<id>_<load>_<resources>_lag-trend_<rep>.csv"
            )
        if len(ids) > 1:
            raise ResultsError(f"{str(directory)!r} holds experiments {', '.join(ids)}: choose one")
        experiment_id = ids[0]
    experiment_id = str(experiment_id)
    if experiment_id not in ids:
        raise ResultsError(
            f"no results of experiment {experiment_id!r} in {str(directory)!r} (found: {list(ids)})"
        )

    json_path = directory / f"exp{experiment_id}_results.json"
    document: dict[str, Any] = {}
    if json_path.exists():
        try:
            document = json.loads(json_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ResultsError(f"{json_path.name} is not valid JSON ({error})") from None
        if document.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
            raise ResultsError(
                f"{json_path.name} has format version {document['format_version']}, newer than this reader"
                f" ({FORMAT_VERSION}): update pytest-theodolite"
            )
    metric = Metric(document["metric"]) if document.get("metric") else None
    demand = capacity = None
    if document.get("demand"):
        demand = _function_from_dict(document["demand"], Metric.DEMAND)
    if document.get("capacity"):
        capacity = _function_from_dict(document["capacity"], Metric.CAPACITY)
    return ExperimentResults(
        experiment_id=experiment_id,
        metric=metric,
        slo_settings=SloSettings.from_dict(document.get("slo", {})),
        settings=document.get("settings", {}),
        environment=document.get("environment", {}),
        loads=tuple(int(x) for x in document.get("loads", ())),
        resources=tuple(int(x) for x in document.get("resources", ())),
        sub_experiments=tuple(SubExperimentRecord.from_dict(e) for e in document.get("sub_experiments", ())),
        demand=demand,  # type: ignore[arg-type]
        capacity=capacity,  # type: ignore[arg-type]
        raw_series=_raw_series(directory, experiment_id),
        capacity_measurements=tuple(document.get("capacity_measurements", ())),
    )


def iter_repetition_series(
    results: ExperimentResults, load: int, resources: int
) -> Iterator[tuple[int, dict[str, TimeSeries]]]:
    """For each repetition of (load, resources): its number and every raw series recorded for it, by name."""
    for repetition in results.repetitions_of(load, resources):
        yield (
            repetition,
            {
                key.series: read_series(path)
                for key, path in results.raw_series.items()
                if (key.load, key.resources, key.repetition) == (load, resources, repetition)
            },
        )


def experiment_id(benchmark_name: str) -> str:
    """Results file names are ``exp<id>_<load>_...``: the id may not contain ``_``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", benchmark_name).strip("-") or "benchmark"
