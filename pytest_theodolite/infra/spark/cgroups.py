"""Per-instance CPU limits with Linux cgroups, like the CPU-limited pods of Theodolite's experiments.

Each Spark instance (a standalone worker and the executor it forks) joins its own cgroup before exec, so the
quota covers the executor JVM too: children inherit their parent's cgroup. cgroup v1 (``cpu.cfs_quota_us``)
and v2 (``cpu.max``) are supported; where neither can be written (no root, no cpu controller) the caller
gets the reason and instances run unlimited.
"""

from __future__ import annotations

import os
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from pytest_theodolite.core.errors import TheodoliteLeakWarning
from pytest_theodolite.infra.waiting import poll_until

PERIOD_US = 100_000
V1_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CgroupSupport:
    available: bool
    version: int | None  # 1 or 2
    root: Path | None
    reason: str  # why not available, or where the groups are made


def detect(v1_root: Path = V1_CPU_ROOT, v2_root: Path = V2_ROOT) -> CgroupSupport:
    if (v1_root / "cpu.cfs_quota_us").exists():
        if os.access(v1_root, os.W_OK):
            return CgroupSupport(True, 1, v1_root, f"cgroup v1 cpu controller at {v1_root}")
        return CgroupSupport(
            False, 1, v1_root, f"{v1_root} is not writable (run as root to limit instance CPU)"
        )
    controllers = v2_root / "cgroup.controllers"
    if controllers.exists():
        if "cpu" not in controllers.read_text().split():
            return CgroupSupport(False, 2, v2_root, "the cgroup v2 cpu controller is not enabled")
        if os.access(v2_root, os.W_OK):
            return CgroupSupport(True, 2, v2_root, f"cgroup v2 at {v2_root}")
        return CgroupSupport(
            False, 2, v2_root, f"{v2_root} is not writable (run as root to limit instance CPU)"
        )
    return CgroupSupport(False, None, None, "no cgroup cpu controller is mounted")


@dataclass
class CpuLimitedGroup:
    """One cgroup with a CPU quota of ``cpus`` cores (0.25 = a quarter of one core; None = unlimited).

    The quota can be changed while processes run in the group, so one cluster serves benchmarks with
    different instance sizes."""

    path: Path
    cpus: float | None
    version: int

    def create(self) -> CpuLimitedGroup:
        self.path.mkdir(parents=True, exist_ok=True)
        if self.version == 2:
            # the parent must delegate the cpu controller to its children
            parent_ctl = self.path.parent / "cgroup.subtree_control"
            if "cpu" not in parent_ctl.read_text().split():
                parent_ctl.write_text("+cpu")
        self.set_cpus(self.cpus)
        return self

    @property
    def quota_file(self) -> Path:
        return self.path / ("cpu.cfs_quota_us" if self.version == 1 else "cpu.max")

    def set_cpus(self, cpus: float | None) -> None:
        self.cpus = cpus
        quota = None if cpus is None else max(1000, int(cpus * PERIOD_US))
        if self.version == 1:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            self.quota_file.write_text("-1" if quota is None else str(quota))
        else:
            self.quota_file.write_text(f"{'max' if quota is None else quota} {PERIOD_US}")

    def cpu_seconds(self) -> float | None:
        """CPU time used so far by the processes in the group (their user + system time); None if unreadable.

        cgroup v2 counts it itself (``cpu.stat``); a v1 ``cpu`` hierarchy without ``cpuacct`` does not, so
        the times of the processes now in the group are summed (an instance's worker and executor JVMs live
        as long as the cluster, so none of their time is lost with an exited process)."""
        try:
            if self.version == 2:
                for line in (self.path / "cpu.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
                return None
            pids = (self.path / "cgroup.procs").read_text().split()
        except OSError:
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in pids:
            try:
                # fields after the parenthesised command: state is field 3, utime 14 and stime 15
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # exited since cgroup.procs was read
            total += int(fields[11]) + int(fields[12])
        return total / ticks

    def throttling(self) -> tuple[int, int] | None:
        """(enforcement periods so far, periods in which the quota held the group back): a group throttled in
        most periods wanted more CPU than its quota; None where unreadable or no quota was ever set."""
        try:
            values = dict(
                line.split(" ", 1)
                for line in (self.path / "cpu.stat").read_text().splitlines()
                if " " in line
            )
            return int(values["nr_periods"]), int(values["nr_throttled"])
        except (OSError, KeyError, ValueError):
            return None

    def join_current_process(self) -> None:
        """Move the calling process into the group (used between fork and exec)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self, timeout_s: float = 10.0) -> bool:
        """rmdir the group once the kernel has moved its exited processes out; False (and a warning naming the
        group and its processes) when it is still busy after ``timeout_s``: left rather than hang teardown."""

        def removed() -> bool:
            try:
                self.path.rmdir()
            except FileNotFoundError:
                pass
            return True

        done, error = poll_until(removed, timeout_s=timeout_s, transient=(OSError,))
        if done:
            return True
        try:
            pids = (self.path / "cgroup.procs").read_text().split()
        except OSError:
            pids = []
        warnings.warn(
            TheodoliteLeakWarning(
                f"cgroup {self.path} could not be removed ({error!r}); processes still in it: "
                f"{' '.join(pids) or 'none'}. Stop them, then remove it with: rmdir {self.path}"
            ),
            stacklevel=2,
        )
        return False


@dataclass
class InstanceGroups:
    """The cgroups of one cluster's instances under a common parent ``theodolite-<pid>``."""

    support: CgroupSupport
    cpus_per_instance: float | None
    #: unique per cluster: a test may start a second cluster beside the session's in the same process
    name: str = field(default_factory=lambda: f"theodolite-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    groups: list[CpuLimitedGroup] = field(default_factory=list)

    @property
    def parent(self) -> Path:
        assert self.support.root is not None
        return self.support.root / self.name

    def make(self, index: int) -> CpuLimitedGroup:
        assert self.support.available and self.support.version is not None
        self.parent.mkdir(exist_ok=True)
        group = CpuLimitedGroup(
            self.parent / f"instance-{index}", self.cpus_per_instance, self.support.version
        )
        self.groups.append(group.create())
        return group

    def remove_all(self) -> None:
        removed = [group.remove() for group in self.groups]
        if self.groups and all(removed):
            CpuLimitedGroup(self.parent, 0, self.support.version or 1).remove()
        self.groups.clear()
