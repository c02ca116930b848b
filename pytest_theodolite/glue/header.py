"""The lines pytest-theodolite adds to pytest's header: where Kafka and Spark come from, and the testbed."""

from __future__ import annotations

import platform

import pytest
import xdist

from pytest_theodolite.engine import services
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.kafka.version import KAFKA_VERSION
from pytest_theodolite.store import host


def report_header(config: pytest.Config, settings: TheodoliteSettings) -> list[str]:
    from pytest_theodolite.infra.kafka.image import kafka_tag
    from pytest_theodolite.infra.spark.jars import pyspark_version

    kafka = settings.kafka_provider + (
        f" ({settings.kafka_bootstrap})"
        if settings.kafka_bootstrap
        else f" (Apache Kafka {KAFKA_VERSION}, KRaft)"
        if settings.kafka_provider == "embedded"
        else f" ({settings.kafka_image or kafka_tag()})"
    )
    lines = [
        f"theodolite: kafka={kafka}, spark master={settings.spark_master} (pyspark {pyspark_version()}), "
        f"max instances={settings.max_instances}",
        f"theodolite: testbed {host.usable_cores()} cores, {host.memory_gib() or 0:.0f} GiB, "
        f"{platform.platform(terse=True)}; "
        f"instance CPU: {services.cpu_limit_note(settings)}",
    ]
    # pytest registers the session as a plugin named "session"; xdist's checks take a session or a request
    if xdist.is_xdist_controller(config.pluginmanager.get_plugin("session")):
        lines.append(
            "theodolite: pytest-xdist: "
            + (
                "other tests wait while a gate point measures (--theodolite-isolation exclusive)"
                if settings.isolation == "exclusive"
                else "other tests run beside measurements (--theodolite-isolation none): verdicts are noisier"
            )
        )
    return lines
