"""A testbed calibration is reused by later runs on the same testbed up to a maximum age, and measured afresh
otherwise: on another testbed, once too old, with the age 0, or where the stored file cannot be read."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_theodolite.engine import calibration as calibration_module
from pytest_theodolite.engine.calibration import Calibration, calibrate_or_reuse, calibration_key
from pytest_theodolite.store.calibrations import recent_calibration, remember_calibration

TESTBED = {"cores": 2, "memory_gib": 24.0, "spark_master": "standalone", "pyspark_version": "4.0.0"}


class CountingCalibration:
    """Stands in for the half-minute measurement; counts how often it runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, spark_cluster: object) -> Calibration:
        self.runs += 1
        return Calibration(300_000.0 + self.runs, 0.1, 0.25, 0.8)


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> CountingCalibration:
    counting = CountingCalibration()
    monkeypatch.setattr(calibration_module, "calibrate", counting)
    return counting


def cluster(limits_instance_cpu: bool = True) -> SimpleNamespace:
    return SimpleNamespace(limits_instance_cpu=limits_instance_cpu)


def test_a_second_run_on_the_same_testbed_reuses_the_first_runs_calibration(tmp_path: Path, measured) -> None:
    first = calibrate_or_reuse(cluster(), TESTBED, tmp_path, 900)
    second = calibrate_or_reuse(cluster(), TESTBED, tmp_path, 900)
    assert measured.runs == 1
    assert first.reused_after_s is None and "earlier run" not in first.describe()
    assert second.rows_per_s == first.rows_per_s and second.cpu_us_per_row == first.cpu_us_per_row
    assert second.reused_after_s is not None and 0 <= second.reused_after_s < 60
    assert "measured 0 min ago by an earlier run on this testbed" in second.describe()


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({**TESTBED, "cores": 8}, id="other cores"),
        pytest.param({**TESTBED, "spark_master": "spark://m:7077"}, id="other cluster"),
        pytest.param({**TESTBED, "pyspark_version": "3.5.6"}, id="other pyspark"),
        pytest.param({**TESTBED, "extra": {"runner": "large"}}, id="other conftest facts"),
    ],
)
def test_another_testbed_measures_its_own(tmp_path: Path, measured, other) -> None:
    calibrate_or_reuse(cluster(), TESTBED, tmp_path, 900)
    calibrate_or_reuse(cluster(), other, tmp_path, 900)
    assert measured.runs == 2


def test_the_kafka_provider_does_not_enter_the_key() -> None:
    # the reference job reads no Kafka: a run on the testcontainers broker may reuse an embedded run's
    assert calibration_key({**TESTBED, "kafka_provider": "embedded"}, True) == calibration_key(
        {**TESTBED, "kafka_provider": "testcontainers"}, True
    )
    assert calibration_key(TESTBED, True) != calibration_key(TESTBED, False)


def test_a_calibration_older_than_the_age_or_an_age_of_zero_is_measured_again(
    tmp_path: Path, measured
) -> None:
    key = calibration_key(TESTBED, True)
    stored = {"rows_per_s": 1.0, "spread": 0.1, "instance_cpu": 0.25, "cpu_us_per_row": 0.8}
    remember_calibration(tmp_path, key, stored, now=1000.0)
    assert recent_calibration(tmp_path, key, 900, now=1899.0) == (stored, 899.0)
    assert recent_calibration(tmp_path, key, 900, now=1901.0) is None
    assert recent_calibration(tmp_path, key, 0, now=1000.0) is None
    assert recent_calibration(tmp_path, key, 900, now=999.0) is None  # from the future: a clock was set back
    calibrate_or_reuse(cluster(), TESTBED, tmp_path, 0)
    assert measured.runs == 1


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"measured_at": "x"}),
        json.dumps({"measured_at": 1e18, "calibration": {"a": 1}}),
    ],
)
def test_an_unreadable_or_foreign_file_is_measured_over(tmp_path: Path, measured, content: str) -> None:
    path = tmp_path / "calibrations" / f"{calibration_key(TESTBED, True)}.json"
    path.parent.mkdir()
    path.write_text(content)
    calibrate_or_reuse(cluster(), TESTBED, tmp_path, 1e30)
    assert measured.runs == 1
    assert json.loads(path.read_text())["calibration"]["rows_per_s"] == 300_001.0


class RecordingCluster:
    """What calibrate() asks of a cluster: the sessions it opens and the limits it sets."""

    def __init__(self, *, can_limit_cpu: bool, limits_instance_cpu: bool) -> None:
        self.can_limit_cpu = can_limit_cpu
        self.limits_instance_cpu = limits_instance_cpu
        self.sessions: list[float | None] = []
        self.limits: list[float | None] = []

    def session(self, instances: int, instance_cpu: float | None, app_name: str):
        from contextlib import nullcontext

        self.sessions.append(instance_cpu)
        return nullcontext(object())

    def limit_instances(self, cpu: float | None) -> None:
        self.limits.append(cpu)

    def instance_cpu_seconds(self) -> float | None:
        return None


@pytest.mark.parametrize(
    ("can_limit", "limits", "session_cpu", "set_limits", "recorded"),
    [
        # the plugin's cgroups: primed at full speed, then limited inside the session
        pytest.param(True, True, [None], [0.25], 0.25, id="cgroups"),
        # Kubernetes: the pod's limit is fixed when it starts, so the session starts limited -- and a baseline of
        # limited instances compares with what it records
        pytest.param(False, True, [0.25], [], 0.25, id="pod limits"),
        # a cluster that limits nothing (standalone without cgroups, YARN)
        pytest.param(False, False, [None], [None], None, id="unlimited"),
    ],
)
def test_the_calibration_runs_under_the_limit_wherever_the_cluster_limits_its_instances(
    monkeypatch, can_limit, limits, session_cpu, set_limits, recorded
) -> None:
    monkeypatch.setattr(
        calibration_module, "reference_job", lambda spark, offset, rows: 1000.0 + offset / rows
    )
    cluster = RecordingCluster(can_limit_cpu=can_limit, limits_instance_cpu=limits)
    measured = calibration_module.calibrate(cluster)
    assert cluster.sessions == session_cpu and cluster.limits == set_limits
    assert measured.instance_cpu == recorded
