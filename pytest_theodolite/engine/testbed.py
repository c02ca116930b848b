"""The testbed a gate ran on, as a baseline records it, and how this session's calibration relates to a
baseline's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pytest_theodolite.engine.calibration import Calibration
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.store.testbed import Testbed


def testbed(
    settings: TheodoliteSettings,
    spark: SparkCluster,
    instance_cpu: float | None,
    calibration: Calibration | None = None,
    extra: Mapping[str, str] | None = None,
) -> Testbed:
    """This machine and setup; the instance CPU is the one a benchmark really ran with; ``extra``: the facts
    of the pytest_theodolite_testbed hook."""
    current = Testbed.current(
        kafka_provider=settings.kafka_provider,
        spark_master=settings.spark_master,
        instance_cpu=instance_cpu if spark.limits_instance_cpu else None,
    )
    facts = dict(extra or {})
    if spark.connector_fallback is not None:
        # named beside every verdict against a baseline measured with the exact connector (a testbed difference)
        facts.setdefault("kafka_connector", spark.connector_fallback)
    current = replace(current, extra=facts)
    if calibration is None:
        return current
    return replace(
        current,
        calibration_rows_per_s=float(round(calibration.rows_per_s)),
        calibration_cpu_us_per_row=None
        if calibration.cpu_us_per_row is None
        else round(calibration.cpu_us_per_row, 4),
        calibration_instance_cpu=calibration.instance_cpu,
        calibration_cpu_recorded=True,
    )
