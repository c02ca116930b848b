"""Before pull-request mode measures anything: REF must exist and hold every gate's job module."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from pytest_theodolite.engine.benchmark import Benchmark
from pytest_theodolite.pull_request.side_spec import SideError, job_reference
from pytest_theodolite.pull_request.worktree import (
    CompareRefError,
    files_missing_at,
    repository_root,
    resolve_ref,
)


def check_ref_holds_jobs(rootpath: Path, ref: str, benchmarks: Iterable[Benchmark]) -> None:
    """Raise CompareRefError, saying what to do, where REF is unknown or lacks a gate's job module, or where a
    job is imported from outside this repository (REF's version of it could not be found)."""
    files: dict[Path, str] = {}
    for benchmark in benchmarks:
        try:
            module, _ = job_reference(benchmark)
        except SideError as exc:
            raise CompareRefError(str(exc)) from None
        path = Path(getattr(sys.modules.get(module), "__file__", None) or "")
        if not path.is_file():
            raise CompareRefError(f"{benchmark.name}: its job module {module} has no file")
        files[path] = f"{benchmark.name} ({module})"
    commit = resolve_ref(rootpath, ref)
    outside = [p for p in files if not p.resolve().is_relative_to(repository_root(rootpath).resolve())]
    if outside:
        raise CompareRefError(
            "--theodolite-compare-ref compares the jobs of this repository, but "
            + ", ".join(f"{files[p]} is imported from {p}" for p in outside)
            + ": install the project in editable mode (pip install -e .)"
        )
    missing = files_missing_at(rootpath, commit, list(files))
    if missing:
        raise CompareRefError(
            f"--theodolite-compare-ref {ref} ({commit[:12]}) lacks the job of "
            + ", ".join(f"{files[p]}: {p.name}" for p in missing)
            + ": a benchmark new in this change has nothing to be compared with; deselect it (-k) for this run"
        )
