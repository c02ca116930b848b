"""The machine's cores and memory, measured in one place for the report header, baselines and results."""

from __future__ import annotations

import os


def usable_cores() -> int | None:
    """Cores this process may run on: honours taskset and cgroup cpusets, unlike os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count()


def memory_gib() -> float | None:
    """Physical memory in GiB, or None where the system does not report it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, ValueError, OSError):
        return None
