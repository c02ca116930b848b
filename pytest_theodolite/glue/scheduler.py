"""Under pytest-xdist every gate point goes to one worker: two sub-experiments must never run at once.

Each worker lists its gate points' node ids in a file in the directory the run's workers share, because the
controller's scheduler sees node ids and not items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_theodolite.store.results import write_atomically

GATE_POINTS_FILE = "theodolite-gate-points-{worker}.txt"


def write_gate_points(shared_dir: Path, worker: str, node_ids: list[str]) -> None:
    write_atomically(shared_dir / GATE_POINTS_FILE.format(worker=worker), "".join(f"{n}\n" for n in node_ids))


def read_gate_points(shared_dir: Path) -> set[str]:
    points: set[str] = set()
    for path in shared_dir.glob(GATE_POINTS_FILE.format(worker="*")):
        points.update(line for line in path.read_text(encoding="utf-8").splitlines() if line)
    return points


def gates_on_one_worker(config: pytest.Config, log: Any) -> Any:
    """A LoadScopeScheduling whose gate points form one scope; every other test its own, spread as with
    ``--dist load``. (xdist's own loadgroup relies on rewriting node ids on the workers, which pytest >= 9.2
    no longer allows; a scheduler sees the ids as they are.)"""
    from xdist.scheduler import LoadScopeScheduling

    shared_dir = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    gate_points: set[str] = set()

    class GatesOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            # called once every worker has collected, so every worker's list is on disk by now
            if not gate_points:
                gate_points.update(read_gate_points(shared_dir))
            if nodeid in gate_points:
                return "theodolite-gates"
            if "@" in nodeid:  # an xdist_group suffix, where the pytest version lets xdist add it
                return nodeid.rsplit("@", 1)[-1]
            return nodeid

    return GatesOnOneWorker(config, log)
