"""The CPU a cgroup's processes used, as pull-request mode's CPU-per-record figure reads it (no root needed:
the group directories here are plain directories with the kernel's file formats)."""

import os
import time

import pytest

from pytest_theodolite.infra.spark.cgroups import CpuLimitedGroup


def burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_v1_sums_the_user_and_system_time_of_the_processes_in_the_group(tmp_path):
    (tmp_path / "cgroup.procs").write_text(f"{os.getpid()}\n")
    group = CpuLimitedGroup(tmp_path, None, 1)
    before = group.cpu_seconds()
    burn(0.3)
    after = group.cpu_seconds()
    assert before is not None and after is not None
    assert after - before == pytest.approx(0.3, abs=0.1)  # clock ticks: 10 ms


def test_v1_skips_a_process_that_exited_since_the_list_was_read(tmp_path):
    (tmp_path / "cgroup.procs").write_text("999999999\n")
    assert CpuLimitedGroup(tmp_path, None, 1).cpu_seconds() == 0


def test_v2_reads_the_groups_own_usage(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    assert CpuLimitedGroup(tmp_path, None, 2).cpu_seconds() == 2.5


def test_an_unreadable_group_has_no_figure(tmp_path):
    assert CpuLimitedGroup(tmp_path / "gone", None, 1).cpu_seconds() is None
