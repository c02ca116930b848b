"""One broker and one Spark cluster for all pytest-xdist workers: started once, stopped once.

The first worker that needs a service starts it detached (it must outlive that worker) and records, under a
file lock, how to reach it and how to stop it. Other workers read the record. The xdist controller, which
outlives every worker, stops everything recorded when the session finishes -- also after failures and
Ctrl-C, since pytest runs ``pytest_sessionfinish`` then too.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.kafka.containers import remove_container
from pytest_theodolite.infra.process import stop_process_group

LOCK_TIMEOUT_S = 900.0


@dataclass
class SharedRecord:
    info: dict[str, Any]  # what clients need: bootstrap address, master URL, ...
    process_groups: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # deleted on release
    cgroups: list[str] = field(default_factory=list)  # removed on release, deepest first
    containers: list[str] = field(default_factory=list)  # Docker container ids, removed on release
    error: str | None = None  # a start that failed: every worker reports the same, none retries


def acquire(root: Path, name: str, start: Callable[[], SharedRecord]) -> SharedRecord:
    root.mkdir(parents=True, exist_ok=True)
    record_path = root / f"theodolite-{name}.json"
    with FileLock(str(record_path) + ".lock", timeout=LOCK_TIMEOUT_S):
        if record_path.exists():
            record = SharedRecord(**json.loads(record_path.read_text()))
        else:
            try:
                record = start()
            except TheodoliteSetupError as exc:
                record = SharedRecord(info={}, error=str(exc))
            record_path.write_text(json.dumps(asdict(record)))
    if record.error:
        raise TheodoliteSetupError(record.error)
    return record


def release_all(root: Path) -> list[str]:
    """Stop every service recorded under ``root``; return their names."""
    released = []
    for record_path in sorted(root.glob("theodolite-*.json")):
        record = SharedRecord(**json.loads(record_path.read_text()))
        for pgid in reversed(record.process_groups):
            stop_process_group(pgid)
        for container_id in record.containers:
            remove_container(container_id)
        for cgroup in sorted(record.cgroups, key=len, reverse=True):
            try:
                Path(cgroup).rmdir()
            except OSError:
                pass
        for path in record.paths:
            shutil.rmtree(path, ignore_errors=True)
        record_path.unlink()
        released.append(record_path.stem.removeprefix("theodolite-"))
    return released
