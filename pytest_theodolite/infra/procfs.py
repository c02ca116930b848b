"""CPU time of the host and of process trees, read from Linux's /proc (for telling host limits from job limits:
core/contention.py). Everything returns None where /proc cannot be read (not Linux, a restricted sandbox)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class HostCpuTimes:
    """Cumulative CPU seconds of all the host's cores since boot (/proc/stat's first line)."""

    busy_s: float  # user, nice, system, irq, softirq and steal: time no task of ours could have had
    total_s: float  # busy + idle + iowait
    cores: int  # the cores /proc/stat counts


def host_cpu_times(proc: Path = PROC) -> HostCpuTimes | None:
    try:
        lines = (proc / "stat").read_text().splitlines()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    fields = [int(v) for v in lines[0].split()[1:9]]  # user nice system idle iowait irq softirq steal
    if len(fields) < 8:
        return None
    idle = fields[3] + fields[4]
    busy = sum(fields) - idle
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return HostCpuTimes(busy / ticks, (busy + idle) / ticks, cores)


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    try:
        # after the parenthesised command (which may hold spaces): state is field 3, ppid 4, utime 14, stime 15
        return (proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None  # exited since it was listed


def parents(proc: Path = PROC) -> dict[int, int]:
    """Every live process's parent, by pid."""
    result = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name), proc)) is not None:
            result[int(entry.name)] = int(fields[1])
    return result


def descendants(roots: Iterable[int], parent_of: dict[int, int], exclude: Collection[int] = ()) -> set[int]:
    """`roots` and every process below them, less the subtrees of `exclude`."""
    children: dict[int, list[int]] = {}
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    pending = [pid for pid in roots if pid not in exclude]
    while pending:
        pid = pending.pop()
        if pid in found:
            continue
        found.add(pid)
        pending.extend(child for child in children.get(pid, ()) if child not in exclude)
    return found


def cpu_seconds(pids: Iterable[int], proc: Path = PROC) -> float:
    """User + system CPU seconds of the live processes among `pids` (a process that exited is left out)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = _stat_fields(pid, proc)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / ticks
