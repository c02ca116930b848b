"""CPU time of one call of UC4's state function (``spark_jobs.uc4.latest_per_child``) per (group, window) and
micro-batch, next to the pandas fold it replaced (concatenate, sort by event time and offset, keep the last row
per child), on scripted readings of 4 children and a scripted GroupState -- no Spark, no broker.

    python experiments/bench_uc4_state.py

The figures it gave, with dates: docs/lab-notes/experiments.md.

"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path

from spark_jobs import uc4

WINDOW = ("group", 0, 60_000)


class ScriptedState:
    """The part of GroupState the state function uses, in memory."""

    def __init__(self) -> None:
        self.exists = False
        self.value: tuple[Any, ...] | None = None
        self.hasTimedOut = False

    @property
    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def getCurrentWatermarkMs(self) -> int:
        return 0

    def update(self, value: tuple[Any, ...]) -> None:
        self.exists, self.value = True, value

    def setTimeoutTimestamp(self, timestamp_ms: int) -> None:
        pass

    def remove(self) -> None:
        self.exists = False


def pandas_fold(key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
    """The fold UC4 used before 2026-11-22: pandas sort and de-duplicate per call."""
    identifier, window_start, window_end = key
    latest: dict[str, list[Any]] = json.loads(state.get[0]) if state.exists else {}
    readings = pd.concat(list(batches), ignore_index=True)
    newest = readings.sort_values(["timestamp", "offset"]).drop_duplicates("child", keep="last")
    for child, timestamp, offset, value in newest[["child", "timestamp", "offset", "valueInW"]].itertuples(
        index=False
    ):
        known = latest.get(child)
        if known is None or (timestamp, offset) > (known[0], known[1]):
            latest[child] = [int(timestamp), int(offset), float(value)]
    state.update((json.dumps(latest),))
    yield pd.DataFrame(
        {
            "identifier": [identifier],
            "timestamp": [max(v[0] for v in latest.values())],
            "sumInW": [sum(v[2] for v in latest.values())],
            "childCount": [len(latest)],
            "windowStart": [window_start],
            "windowEnd": [window_end],
        }
    )


def readings(rows: int, children: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    timestamps = np.sort(rng.integers(0, 60_000, rows))
    return pd.DataFrame(
        {
            "identifier": [WINDOW[0]] * rows,
            "child": [f"s_{i % children}" for i in range(rows)],
            "timestamp": timestamps,
            "offset": np.arange(rows),
            "valueInW": rng.random(rows),
        }
    )


def us_per_call(fold: Callable[..., Iterator[pd.DataFrame]], rows: int, states: int) -> float:
    """Mean CPU microseconds of a call: `states` windows, each folded three micro-batches in a row."""
    batch = readings(rows)
    started = time.process_time()
    for _ in range(states):
        state = ScriptedState()
        for _ in range(3):
            list(fold(WINDOW, iter([batch]), state))
    return (time.process_time() - started) / (3 * states) * 1e6


def main() -> None:
    print("| rows per call | pandas fold, us | latest_per_child, us | ratio |")
    print("|---:|---:|---:|---:|")
    for rows in (8, 240, 3000):
        states = 300 if rows < 1000 else 50
        before, after = (
            us_per_call(pandas_fold, rows, states),
            us_per_call(uc4.latest_per_child, rows, states),
        )
        print(f"| {rows} | {before:,.0f} | {after:,.0f} | {before / after:.1f}x |")


if __name__ == "__main__":
    main()
