"""One typed settings object, built from the command line > ``[tool.pytest.ini_options]`` > defaults."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_theodolite.engine.calibration import DEFAULT_MAX_AGE_S
from pytest_theodolite.engine.markers import MARKER_HELP
from pytest_theodolite.infra.kafka import client_properties
from pytest_theodolite.infra.maven import default_cache_dir
from pytest_theodolite.infra.spark.masters import (
    ClusterAccess,
    MasterError,
    MasterKind,
    check_access,
    check_session_conf,
    master_kind,
)
from pytest_theodolite.store import host

KAFKA_PROVIDERS = ("embedded", "testcontainers", "external")
MANAGED_SPARK_MASTERS = ("standalone", "local-cluster")
ISOLATION_MODES = ("exclusive", "none")


class SettingsError(ValueError):
    """A setting has a value we cannot use; the message names the option and the fix."""


@dataclass(frozen=True)
class TheodoliteSettings:
    kafka_provider: str = "embedded"
    kafka_bootstrap: str | None = None
    kafka_port: int = 0
    #: client properties of an external cluster; may hold secrets: never printed (repr=False)
    kafka_properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    kafka_timeout_s: float = 60.0
    #: what --kafka testcontainers starts; None: the image this plugin builds here (kafka/image.py)
    kafka_image: str | None = None
    spark_master: str = "standalone"
    #: what a Spark cluster the plugin did not start needs: the driver's address, Kubernetes' image
    spark_access: ClusterAccess = field(default_factory=ClusterAccess)
    #: where the jobs' checkpoints go (a path or URI every executor can reach); None: a local temporary
    #: directory, only on a cluster started here
    checkpoint_root: str | None = None
    #: topics the gates create: their name prefix, replication factor and min.insync.replicas (None: the
    #: cluster's own default -- for the replication factor its brokers, up to 3)
    kafka_topic_prefix: str = "theodolite-"
    kafka_replication_factor: int | None = None
    kafka_min_insync_replicas: int | None = None
    #: existing topics by role (input, output, ...) used instead of topics the gates create (--kafka-topics)
    kafka_topics: Mapping[str, str] = field(default_factory=dict)
    max_instances: int = 4
    instance_cpu: float | None = None
    cache_dir: Path = field(default_factory=default_cache_dir)
    #: a testbed calibration an earlier run stored is reused up to this age (engine/calibration.py); 0: never
    calibration_max_age_s: float = DEFAULT_MAX_AGE_S
    results_dir: Path = Path("theodolite-results")
    baselines_dir: Path = Path("baselines")
    update_baselines: bool = False
    #: under pytest-xdist: "exclusive" = other tests wait while a gate point measures; "none" = they run beside it
    isolation: str = "exclusive"
    #: pull-request mode: the git revision the working tree is compared with; None: off
    compare_ref: str | None = None
    #: gate settings given on the command line or in the ini file; they override a marker's values
    gate_overrides: Mapping[str, str] = field(default_factory=dict)
    #: benchmark name -> job options that override the benchmark's own (--theodolite-job-option)
    job_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Spark settings of every session, the calibration's too (--spark-conf, ini theodolite_spark_conf)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    #: how long a session waits for its executors to register before it is a setup error
    spark_register_timeout_s: float = 120.0

    @property
    def manages_spark(self) -> bool:
        return self.spark_master in MANAGED_SPARK_MASTERS

    @property
    def spark_kind(self) -> MasterKind:
        return master_kind(self.spark_master)


# (dest, ini name, type, default, help) -- the CLI flag is derived from dest, the ini key is `theodolite_<...>`
OPTIONS: list[tuple[str, str, str, str]] = [
    (
        "--kafka",
        "theodolite_kafka",
        "embedded",
        "Kafka provider: embedded (a broker started here), "
        "testcontainers (needs Docker) or external (with --kafka-bootstrap)",
    ),
    (
        "--kafka-bootstrap",
        "theodolite_kafka_bootstrap",
        "",
        "host:port[,...] of an existing cluster (--kafka external)",
    ),
    ("--kafka-port", "theodolite_kafka_port", "0", "port of the embedded broker (0: a free one)"),
    (
        "--kafka-image",
        "theodolite_kafka_image",
        "",
        "the Kafka image --kafka testcontainers starts, e.g. apache/kafka:4.1.1 "
        "(default: one built here from Debian packages and the Maven-resolved Kafka jars)",
    ),
    ("--kafka-timeout", "theodolite_kafka_timeout", "60", "seconds to wait for a broker to answer"),
    (
        "--spark-master",
        "theodolite_spark_master",
        "standalone",
        "standalone (a local cluster started here), "
        "local-cluster, or the URL of an existing master (spark://..., k8s://..., yarn); docs/clusters.md",
    ),
    (
        "--spark-driver-host",
        "theodolite_spark_driver_host",
        "",
        "on a cluster not started here: the address of this machine its executors reach the driver at "
        "(default: Spark's choice, this machine's first non-loopback address)",
    ),
    (
        "--spark-kubernetes-image",
        "theodolite_spark_kubernetes_image",
        "",
        "k8s:// masters: the executors' container image (the driver's Python and pyspark version)",
    ),
    (
        "--spark-kubernetes-namespace",
        "theodolite_spark_kubernetes_namespace",
        "",
        "k8s:// masters: the executors' namespace",
    ),
    (
        "--theodolite-checkpoint-root",
        "theodolite_checkpoint_root",
        "",
        "where the jobs' checkpoints go: a path or URI every executor reaches (hdfs://..., s3a://..., a shared "
        "mount); needed on a cluster not started here (default there: none; here: a temporary directory)",
    ),
    (
        "--kafka-topic-prefix",
        "theodolite_kafka_topic_prefix",
        "theodolite-",
        "prefix of the topics the gates create and delete (a prefix your ACLs allow)",
    ),
    (
        "--kafka-replication-factor",
        "theodolite_kafka_replication_factor",
        "",
        "replication factor of the topics the gates create (default: the cluster's brokers, up to 3)",
    ),
    (
        "--kafka-min-insync-replicas",
        "theodolite_kafka_min_insync_replicas",
        "",
        "min.insync.replicas of the topics the gates create (default: the broker's)",
    ),
    (
        "--kafka-topics",
        "theodolite_kafka_topics",
        "",
        "ROLE=TOPIC,...: existing topics to use instead of creating and deleting topics (a cluster that lets "
        "the gates create none), e.g. input=gates.in,output=gates.out; their records are deleted before and "
        "after each repetition",
    ),
    (
        "--spark-register-timeout",
        "theodolite_spark_register_timeout",
        "120",
        "seconds a session waits for its executors to register before the point is a setup error (a cluster "
        "that starts executors slowly, or a queue that admits the application late)",
    ),
    (
        "--theodolite-max-instances",
        "theodolite_max_instances",
        "4",
        "most Spark instances a session may ask for",
    ),
    (
        "--theodolite-instance-cpu",
        "theodolite_instance_cpu",
        "",
        "CPU cores per instance, e.g. 0.25, enforced "
        "with cgroups where the process may create them (empty: unlimited)",
    ),
    (
        "--theodolite-cache-dir",
        "theodolite_cache_dir",
        "",
        "where Maven-resolved jars and testbed calibrations are kept",
    ),
    (
        "--theodolite-calibration-max-age",
        "theodolite_calibration_max_age",
        f"{DEFAULT_MAX_AGE_S:g}",
        "seconds an earlier run's testbed calibration on this host (same cluster, Spark and Python) is reused "
        "instead of measuring it again (about half a minute); 0: calibrate in every run",
    ),
    (
        "--theodolite-results",
        "theodolite_results",
        "theodolite-results",
        "where raw lag series, demand tables, results JSON and plots go (relative to the rootdir)",
    ),
    (
        "--theodolite-baselines",
        "theodolite_baselines",
        "baselines",
        "where the stored demand functions are (relative to the rootdir)",
    ),
    (
        "--theodolite-isolation",
        "theodolite_isolation",
        "exclusive",
        "under pytest-xdist: exclusive (other tests "
        "wait while a gate point measures, so they cannot take the CPU its instances are measured on) or none "
        "(they run beside it: faster, noisier verdicts)",
    ),
    (
        "--theodolite-compare-ref",
        "theodolite_compare_ref",
        "",
        "pull-request mode: also measure the jobs as they are at this git revision (e.g. origin/main), side "
        "by side with the working tree, and judge the change against it",
    ),
]

#: per-gate settings on the command line (``--theodolite-<key>``) and in the ini file (``theodolite_<key>``):
#: a value there overrides the ``theodolite`` marker's, which overrides engine.markers.GATE_DEFAULTS; each
#: one's help is the marker key's (engine.markers.MARKER_HELP)
GATE_OPTION_KEYS: tuple[str, ...] = (
    "duration",
    "max_duration",
    "warmup",
    "max_warmup",
    "confidence",
    "prime",
    "slope_method",
    "threshold",
    "strategy",
    "exact_demand",
    "max_batch_duration",
    "max_late_rate",
    "paired_cost",
    "paired_cost_tolerance",
    "ref_below",
    "repetitions",
    "tolerance",
    "cost_tolerance",
)
GATE_OPTIONS: list[tuple[str, str, str]] = [
    ("--theodolite-" + key.replace("_", "-"), key, MARKER_HELP[key]) for key in GATE_OPTION_KEYS
]


def ini_name(flag: str) -> str:
    return next(ini for f, ini, _, _ in OPTIONS if f == flag)


def parse_job_options(entries: list[str]) -> dict[str, dict[str, Any]]:
    """``["uc1-keys:extra_hash_rounds=2"]`` -> ``{"uc1-keys": {"extra_hash_rounds": 2}}``; a value that reads as
    JSON (a number, true, a list) is taken as that, anything else as text."""
    options: dict[str, dict[str, Any]] = {}
    for entry in entries:
        benchmark, colon, assignment = entry.partition(":")
        key, equals, value = assignment.partition("=")
        if not (colon and equals and benchmark.strip() and key.strip()):
            raise SettingsError(
                f"--theodolite-job-option {entry!r} is not BENCHMARK:KEY=VALUE, e.g. "
                "uc1-keys:extra_hash_rounds=2"
            )
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        options.setdefault(benchmark.strip(), {})[key.strip()] = parsed
    return options


def parse_spark_conf(entries: list[str]) -> dict[str, str]:
    """``["spark.yarn.queue=gates"]`` -> ``{"spark.yarn.queue": "gates"}`` (a later entry wins)."""
    conf: dict[str, str] = {}
    for entry in entries:
        key, equals, value = entry.strip().partition("=")
        if not (equals and key.strip().startswith("spark.")):
            raise SettingsError(
                f"--spark-conf / theodolite_spark_conf {entry!r} is not KEY=VALUE with a Spark key, e.g. "
                "spark.yarn.queue=gates"
            )
        conf[key.strip()] = value.strip()
    return conf


def parse_topic_roles(text: str) -> dict[str, str]:
    """``"input=gates.in,output=gates.out"`` -> ``{"input": "gates.in", "output": "gates.out"}``."""
    roles: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        role, equals, topic = (part.strip() for part in entry.partition("="))
        if not (equals and role and re.fullmatch(r"[A-Za-z0-9._-]+", topic)):
            raise SettingsError(
                f"--kafka-topics entry {entry!r} is not ROLE=TOPIC (a topic name of letters, digits, '.', '_' "
                "and '-'), e.g. --kafka-topics input=gates.in,output=gates.out"
            )
        roles[role] = topic
    if roles and len(set(roles.values())) < len(roles):
        raise SettingsError(
            f"--kafka-topics gives one topic to several roles ({text}): each role needs its own"
        )
    return roles


def build(
    get: Callable[[str], Any],
    ini_properties: list[str],
    environ: Mapping[str, str] = os.environ,
    gate_overrides: Mapping[str, str] | None = None,
    update_baselines: bool = False,
    rootdir: Path = Path("."),
    job_options: list[str] | None = None,
    spark_conf: list[str] | None = None,
) -> TheodoliteSettings:
    """``get(flag)`` returns the command-line value, or the ini value, or the default (in that order)."""

    def text(flag: str) -> str:
        value = get(flag)
        value = "" if value is None else str(value).strip()
        return value or next(default for f, _, default, _ in OPTIONS if f == flag)

    cpu_text = text("--theodolite-instance-cpu")
    compare_ref = text("--theodolite-compare-ref") or None
    if compare_ref and update_baselines:
        raise SettingsError(
            "--theodolite-update-baselines records the working tree's demand as the baseline, "
            "--theodolite-compare-ref compares it with another revision: use one at a time"
        )
    isolation = text("--theodolite-isolation")
    if isolation not in ISOLATION_MODES:
        raise SettingsError(
            f"--theodolite-isolation / {ini_name('--theodolite-isolation')} = {isolation!r} is not "
            f"an isolation mode; choose one of {', '.join(ISOLATION_MODES)}"
        )
    return TheodoliteSettings(
        **_kafka_settings(text, ini_properties, environ),
        **_spark_settings(text, environ, spark_conf or []),
        cache_dir=Path(text("--theodolite-cache-dir")).expanduser()
        if text("--theodolite-cache-dir")
        else default_cache_dir(),
        calibration_max_age_s=_number(
            text("--theodolite-calibration-max-age"),
            "--theodolite-calibration-max-age",
            float,
            low=0,
            high=86400,
        ),
        results_dir=rootdir / Path(text("--theodolite-results")).expanduser(),
        baselines_dir=rootdir / Path(text("--theodolite-baselines")).expanduser(),
        update_baselines=update_baselines,
        isolation=isolation,
        compare_ref=compare_ref,
        gate_overrides={
            k: v
            for k, v in {**(gate_overrides or {}), "instance_cpu": cpu_text}.items()
            if v not in (None, "")
        },
        job_options=parse_job_options(job_options or []),
    )


def _kafka_settings(
    text: Callable[[str], str], ini_properties: list[str], environ: Mapping[str, str]
) -> dict[str, Any]:
    """The Kafka cluster's settings (TheodoliteSettings' kafka_* fields), each checked."""
    provider = text("--kafka")
    if provider not in KAFKA_PROVIDERS:
        raise SettingsError(
            f"--kafka / {ini_name('--kafka')} = {provider!r} is not a Kafka provider; "
            f"choose one of {', '.join(KAFKA_PROVIDERS)}"
        )
    bootstrap = text("--kafka-bootstrap") or environ.get("THEODOLITE_KAFKA_BOOTSTRAP", "")
    if provider == "external" and not bootstrap:
        raise SettingsError(
            "--kafka external needs the cluster's address: pass --kafka-bootstrap host:port "
            "(or set theodolite_kafka_bootstrap in the ini file, or THEODOLITE_KAFKA_BOOTSTRAP)"
        )
    try:
        properties = client_properties.parse_lines(ini_properties, "theodolite_kafka_properties")
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc
    properties.update(client_properties.from_environment(environ))
    try:
        client_properties.check(properties)
    except ValueError as exc:
        raise SettingsError(
            f"Kafka client properties (theodolite_kafka_properties, THEODOLITE_KAFKA_*): {exc}"
        ) from exc
    prefix = text("--kafka-topic-prefix")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
        raise SettingsError(
            f"--kafka-topic-prefix / {ini_name('--kafka-topic-prefix')} = {prefix!r}: a Kafka topic name "
            "holds only letters, digits, '.', '_' and '-'"
        )
    replication = text("--kafka-replication-factor")
    min_insync = text("--kafka-min-insync-replicas")
    if replication and min_insync and min_insync.isdigit() and replication.isdigit():
        if int(min_insync) > int(replication):
            raise SettingsError(
                f"--kafka-min-insync-replicas {min_insync} exceeds --kafka-replication-factor {replication}: no "
                "write to such a topic would ever be acknowledged"
            )
    return {
        "kafka_provider": provider,
        "kafka_bootstrap": bootstrap or None,
        "kafka_port": _number(text("--kafka-port"), "--kafka-port", int, low=0, high=65535),
        "kafka_properties": properties,
        "kafka_timeout_s": _number(text("--kafka-timeout"), "--kafka-timeout", float, low=1, high=3600),
        "kafka_image": text("--kafka-image") or None,
        "kafka_topic_prefix": prefix,
        "kafka_replication_factor": (
            _number(replication, "--kafka-replication-factor", int, low=1, high=32) if replication else None
        ),
        "kafka_min_insync_replicas": (
            _number(min_insync, "--kafka-min-insync-replicas", int, low=1, high=32) if min_insync else None
        ),
        "kafka_topics": parse_topic_roles(text("--kafka-topics")),
    }


def _spark_settings(
    text: Callable[[str], str], environ: Mapping[str, str], spark_conf: list[str]
) -> dict[str, Any]:
    """The Spark cluster's and its instances' settings, each checked."""
    cpu_text = text("--theodolite-instance-cpu")
    instance_cpu = (
        _number(cpu_text, "--theodolite-instance-cpu", float, low=0.01, high=float(host.usable_cores() or 1))
        if cpu_text
        else None
    )
    spark_master = text("--spark-master") or "standalone"
    try:
        kind = master_kind(spark_master)
    except MasterError as exc:
        raise SettingsError(str(exc)) from None
    access = ClusterAccess(
        driver_host=text("--spark-driver-host") or None,
        k8s_image=text("--spark-kubernetes-image") or None,
        k8s_namespace=text("--spark-kubernetes-namespace") or None,
    )
    try:
        check_access(kind, access, environ)
    except MasterError as exc:
        raise SettingsError(str(exc)) from None
    checkpoint_root = text("--theodolite-checkpoint-root") or None
    if checkpoint_root is None and not kind.started_here:
        raise SettingsError(
            f"--spark-master {spark_master} is a cluster not started here: its executors keep the job's state "
            "in its checkpoint, which they must all reach. Pass --theodolite-checkpoint-root with a shared "
            "location (hdfs://namenode/theodolite, s3a://bucket/theodolite, or a path mounted on every host)"
        )
    session_conf = parse_spark_conf(spark_conf)
    try:
        check_session_conf(session_conf, "--spark-conf / theodolite_spark_conf")
    except MasterError as exc:
        raise SettingsError(str(exc)) from None
    return {
        "spark_master": spark_master,
        "spark_access": access,
        "checkpoint_root": checkpoint_root,
        "max_instances": _number(
            text("--theodolite-max-instances"), "--theodolite-max-instances", int, low=1, high=64
        ),
        "instance_cpu": instance_cpu,
        "spark_conf": session_conf,
        "spark_register_timeout_s": _number(
            text("--spark-register-timeout"), "--spark-register-timeout", float, low=1, high=3600
        ),
    }


def _number(value: str, flag: str, kind: type, low: float, high: float):
    try:
        number = kind(value)
    except ValueError:
        raise SettingsError(f"{flag} / {ini_name(flag)} = {value!r} is not a {kind.__name__}") from None
    if not low <= number <= high:
        raise SettingsError(f"{flag} / {ini_name(flag)} = {value} is outside {low:g}..{high:g}")
    return number
