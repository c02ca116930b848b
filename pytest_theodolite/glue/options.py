"""The plugin's command-line options, ini keys and markers, all made from the tables in engine.settings and
engine.markers, so that ``--help``, ``pytest --markers`` and docs/reference say the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_theodolite.engine.markers import GATE_DEFAULTS, MARKER_HELP
from pytest_theodolite.engine.settings import GATE_OPTIONS, ISOLATION_MODES, KAFKA_PROVIDERS, OPTIONS

CHOICES = {"--kafka": KAFKA_PROVIDERS, "--theodolite-isolation": ISOLATION_MODES}

#: options of the command line alone: (flag, dest, help)
COMMAND_LINE_ONLY: list[tuple[str, str, str]] = [
    (
        "--theodolite-job-option",
        "theodolite_job_options",
        "override a job option of one benchmark, BENCHMARK:KEY=VALUE, e.g. uc1-keys:extra_hash_rounds=2 "
        "(repeatable); recorded in the results",
    ),
    (
        "--theodolite-update-baselines",
        "theodolite_update_baselines",
        "record the measured demand functions as the new baselines instead of comparing",
    ),
    (
        "--theodolite-pr-comment",
        "theodolite_pr_comment",
        "write the run's verdict and each benchmark's table as one Markdown comment into FILE, for a workflow "
        "to post on the pull request (docs/github-actions.md)",
    ),
    (
        "--spark-conf",
        "theodolite_spark_conf_options",
        "a Spark setting of every session, KEY=VALUE, e.g. spark.yarn.queue=gates (repeatable; after the ini "
        "key theodolite_spark_conf, before a gate's spark_conf): ports, queues, pod templates, storage "
        "credentials; spark.jars is added to the Kafka connector's jars; the executors' number and size stay the "
        "gate's",
    ),
]

#: ini keys without a command-line option: (key, help)
INI_ONLY: list[tuple[str, str]] = [
    (
        "theodolite_spark_conf",
        "Spark settings of every session, one KEY=VALUE a line (as --spark-conf, which adds to them)",
    ),
    (
        "theodolite_kafka_properties",
        "client properties of an external cluster, one key=value a line (put secrets in "
        "THEODOLITE_KAFKA_<NAME> environment variables instead)",
    ),
]

EXCLUSIVE_MARKER = (
    "theodolite_exclusive: under pytest-xdist, run this test alone, as a gate point runs (for tests that "
    "measure something themselves)"
)


def _argparse(text: str) -> str:
    return text.replace("%", "%%")  # argparse formats help with %


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("theodolite", "Theodolite scalability benchmarks")
    for flag, ini, default, help_text in OPTIONS:
        group.addoption(
            flag,
            dest=ini,
            default=None,
            choices=CHOICES.get(flag),
            help=_argparse(f"{help_text} [ini: {ini}]"),
        )
        parser.addini(ini, help_text, default=default)
    for flag, key, help_text in GATE_OPTIONS:
        group.addoption(
            flag,
            dest=f"theodolite_gate_{key}",
            default=None,
            help=_argparse(f"{help_text} [ini: theodolite_{key}; overrides the marker]"),
        )
        parser.addini(f"theodolite_{key}", help_text, default="")
    job_option, update, comment, spark_conf = COMMAND_LINE_ONLY
    for (flag, dest, help_text), metavar in ((job_option, "BENCHMARK:KEY=VALUE"), (spark_conf, "KEY=VALUE")):
        group.addoption(
            flag, dest=dest, action="append", default=[], metavar=metavar, help=_argparse(help_text)
        )
    group.addoption(update[0], dest=update[1], action="store_true", default=False, help=_argparse(update[2]))
    group.addoption(comment[0], dest=comment[1], default=None, metavar="FILE", help=_argparse(comment[2]))
    for key, help_text in INI_ONLY:
        parser.addini(key, help_text, type="linelist", default=[])


def gate_marker_signature() -> str:
    keys = ", ".join(f"{key}={value!r}" for key, value in GATE_DEFAULTS.items())
    return f"theodolite(benchmark, *, loads, {keys})"


def marker_lines() -> list[str]:
    """The ``theodolite`` marker with every key and its default, and ``theodolite_exclusive``."""
    return [
        f"{gate_marker_signature()}: a scalability gate; a test with this marker that uses the "
        f"theodolite_gate fixture runs once per load. Keys: {', '.join(MARKER_HELP)} (docs/reference/markers.md)",
        EXCLUSIVE_MARKER,
    ]


def option_getter(config: pytest.Config) -> Callable[[str], Any]:
    """``get(flag)``: the command-line value, else the ini value (settings.build applies the default)."""

    def get(flag: str) -> Any:
        ini = next(i for f, i, _, _ in OPTIONS if f == flag)
        value = config.getoption(ini)
        return config.getini(ini) if value is None else value

    return get


def gate_overrides(config: pytest.Config) -> dict[str, Any]:
    """Per-gate settings from the command line, else the ini file (empty where neither gives one)."""
    return {
        key: config.getoption(f"theodolite_gate_{key}") or config.getini(f"theodolite_{key}")
        for _, key, _ in GATE_OPTIONS
    }
