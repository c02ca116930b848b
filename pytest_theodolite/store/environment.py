"""What a run records beside its numbers: the versions, the machine, when it started and the revision of the
measured source."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_theodolite.store import host


def source_revision(directory: Path | None = None) -> dict[str, Any] | None:
    """The git commit the measured code was checked out at, and whether the working tree differed from it (a
    pull request's change, uncommitted): what ``python -m pytest_theodolite history`` lines runs up by. None
    outside a git repository, or where git is missing."""
    cwd = directory or Path.cwd()
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def environment_info(source_dir: Path | None = None) -> dict[str, Any]:
    """Versions and machine facts worth keeping beside the numbers (no imports of the heavy packages), when
    the run started and the revision of the source it measured (the git checkout `source_dir`, by default the
    working directory, lies in)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for distribution in ("pytest-theodolite", "pyspark", "kafka-python", "numpy", "pandas", "pytest"):
        try:
            versions[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[distribution] = None
    return {
        "versions": versions,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "usable_cores": host.usable_cores(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "revision": source_revision(source_dir),
    }
