"""Testbed calibrations kept between runs on one host: one JSON file per testbed key in the cache directory.

A later run on the same testbed (same host, cluster and Spark) may reuse a calibration up to a maximum age
instead of measuring the testbed again (engine/calibration.py says why that is sound).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_theodolite.store.results import write_atomically

#: the cache directory's subfolder
FOLDER = "calibrations"


def _path(cache_dir: Path, key: str) -> Path:
    return cache_dir / FOLDER / f"{key}.json"


def recent_calibration(
    cache_dir: Path, key: str, max_age_s: float, now: float
) -> tuple[dict[str, Any], float] | None:
    """(the stored calibration, its age in seconds) for `key` where one at most `max_age_s` old is stored, else
    None. A file that cannot be read is treated as absent: the run measures afresh and overwrites it."""
    if max_age_s <= 0:
        return None
    try:
        document = json.loads(_path(cache_dir, key).read_text())
        measured_at = float(document["measured_at"])
        calibration = dict(document["calibration"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    age = now - measured_at
    if not 0 <= age <= max_age_s:
        return None
    return calibration, age


def remember_calibration(cache_dir: Path, key: str, calibration: dict[str, Any], now: float) -> None:
    """Store `calibration` as measured at `now` for `key` (atomically: another process may read it meanwhile)."""
    path = _path(cache_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps({"measured_at": now, "calibration": calibration}, indent=1) + "\n")
