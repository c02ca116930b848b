"""Which kind of Spark master a URL names, and the session settings that give exactly r one-core executor
instances on it.

Each cluster manager sizes an application its own way: a standalone master hands out cores up to
``spark.cores.max`` (with one-core executors, r cores are r executors) and ignores ``spark.executor.instances``;
Kubernetes and YARN start ``spark.executor.instances`` executors and ignore the core cap. An instance's CPU
share is enforced by the plugin's cgroups on its own standalone cluster, by the pod CPU limit on Kubernetes
(``spark.kubernetes.executor.{request,limit}.cores``; the request may not exceed the limit, or the pods are
never created), and nowhere else. Spark Connect (``sc://``) clients cannot size the executors at all, and
``local[...]`` runs no executors: both are refused.

Pure: no Spark here; infra/spark/cluster.py applies what this says.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_theodolite.infra.ports import LOOPBACK


class MasterKind(str, enum.Enum):
    MANAGED = "standalone"  # the plugin's own standalone cluster, started here
    LOCAL_CLUSTER = "local-cluster"  # Spark's test cluster inside the driver JVM, started here
    STANDALONE = "spark"  # an existing standalone master: spark://host:port
    KUBERNETES = "k8s"  # k8s://https://api-server:port
    YARN = "yarn"

    @property
    def started_here(self) -> bool:
        """The plugin starts the cluster: its executors share this machine, its file system and Python."""
        return self in (MasterKind.MANAGED, MasterKind.LOCAL_CLUSTER)


class MasterError(ValueError):
    """A Spark master the gates cannot size; the message says what to use instead."""


def master_kind(master: str) -> MasterKind:
    """The kind of ``--spark-master``; raises MasterError for masters whose executors cannot be sized."""
    if master in (MasterKind.MANAGED.value, MasterKind.LOCAL_CLUSTER.value):
        return MasterKind(master)
    if master.startswith("spark://"):
        return MasterKind.STANDALONE
    if master.startswith("k8s://"):
        return MasterKind.KUBERNETES
    if master == "yarn":
        return MasterKind.YARN
    if master.startswith("sc://"):
        raise MasterError(
            f"--spark-master {master!r} is a Spark Connect server: a Connect client cannot choose how many "
            "executors run its queries, and an instance count is what a gate measures. Point --spark-master "
            "at the cluster's master instead (spark://..., k8s://..., yarn)"
        )
    if master == "local" or master.startswith("local["):
        raise MasterError(
            f"--spark-master {master!r} runs the job inside the driver, without executors to count: use "
            "'standalone' (a cluster of executor JVMs started here) or 'local-cluster'"
        )
    raise MasterError(
        f"--spark-master {master!r} is not a master the gates can size: use 'standalone', 'local-cluster', "
        "spark://host:port, k8s://https://host:port or yarn"
    )


#: what the plugin sets on every session, since an instance count is what a gate measures: no setting of the
#: user's may change it (sizing_settings; spark.jars is appended to, infra/spark/cluster.py)
SIZING_KEYS = (
    "spark.master",
    "spark.app.name",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.cores.max",
    "spark.dynamicAllocation.enabled",
    "spark.kubernetes.executor.request.cores",
    "spark.kubernetes.executor.limit.cores",
)
#: environment variables that turn pyspark's SparkSession.builder into a Spark Connect client
CONNECT_VARIABLES = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")


def connect_requested(conf: Mapping[str, str], environ: Mapping[str, str]) -> str | None:
    """What asks for a Spark Connect session -- which cannot size its executors -- in `conf` or `environ`, or
    None."""
    if conf.get("spark.remote"):
        return f"spark.remote={conf['spark.remote']}"
    if str(conf.get("spark.api.mode", "")).lower() == "connect":
        return "spark.api.mode=connect"
    for name in CONNECT_VARIABLES:
        if environ.get(name):
            return f"the environment variable {name}={environ[name]}"
    if environ.get("SPARK_API_MODE", "").lower() == "connect":
        return "the environment variable SPARK_API_MODE=connect"
    return None


def check_session_conf(conf: Mapping[str, str], where: str, environ: Mapping[str, str] | None = None) -> None:
    """Refuse Spark settings of the user's (`where` names them: --spark-conf, a gate's spark_conf) that would size
    the executors or turn the session into a Spark Connect client, with what to do instead."""
    sizing = sorted(set(conf) & set(SIZING_KEYS))
    if sizing:
        raise MasterError(
            f"{where} sets {', '.join(sizing)}: how many executors of what size run is what a gate measures, and "
            "the plugin sets it (the marker's resources, --theodolite-max-instances, instance_cpu); remove it"
        )
    connect = connect_requested(conf, environ or {})
    if connect:
        raise MasterError(
            f"{where}: {connect} asks for a Spark Connect session, whose client cannot choose how many executors "
            "run its queries -- an instance count is what a gate measures. Remove it (unset the variable) and "
            "point --spark-master at the cluster's master (spark://..., k8s://..., yarn)"
        )


@dataclass(frozen=True)
class ClusterAccess:
    """What a cluster the plugin did not start needs from this side."""

    #: the address the executors reach the driver at (spark.driver.host); None: Spark's choice (this machine's
    #: first non-loopback address) -- on a cluster the plugin started, always the loopback address
    driver_host: str | None = None
    #: Kubernetes: the executors' container image (it must hold the Python and pyspark the driver runs)
    k8s_image: str | None = None
    k8s_namespace: str | None = None


def sizing_settings(kind: MasterKind, instances: int, instance_cpu: float | None) -> dict[str, str]:
    """Settings for exactly `instances` one-core executors; on Kubernetes each limited to `instance_cpu`
    cores (None: unlimited)."""
    settings = {"spark.executor.cores": "1", "spark.dynamicAllocation.enabled": "false"}
    if kind in (MasterKind.KUBERNETES, MasterKind.YARN):
        settings["spark.executor.instances"] = str(instances)
    else:
        settings["spark.cores.max"] = str(instances)
    if kind is MasterKind.KUBERNETES and instance_cpu is not None:
        cores = f"{instance_cpu:g}"
        # request <= limit, or Kubernetes refuses every executor pod and Spark retries forever
        settings["spark.kubernetes.executor.request.cores"] = cores
        settings["spark.kubernetes.executor.limit.cores"] = cores
    return settings


def access_settings(kind: MasterKind, access: ClusterAccess) -> dict[str, str]:
    """Where the driver listens and, on Kubernetes, what the executor pods run."""
    if kind.started_here:
        return {"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK}
    settings = {}
    if access.driver_host:
        settings["spark.driver.host"] = access.driver_host
        settings["spark.driver.bindAddress"] = access.driver_host
    if kind is MasterKind.KUBERNETES:
        if access.k8s_image:
            settings["spark.kubernetes.container.image"] = access.k8s_image
        if access.k8s_namespace:
            settings["spark.kubernetes.namespace"] = access.k8s_namespace
    return settings


def cpu_limit_mechanism(kind: MasterKind, cgroups_available: bool) -> str | None:
    """What enforces an instance's CPU share on this master, or None (instances are unlimited)."""
    if kind is MasterKind.MANAGED:
        return "cgroups" if cgroups_available else None
    if kind is MasterKind.KUBERNETES:
        return "Kubernetes pod CPU limit"
    return None


def check_access(kind: MasterKind, access: ClusterAccess, environ: Mapping[str, str]) -> None:
    """Raise MasterError for what the cluster manager would refuse only after a long wait, or with an error
    that does not say which option to set."""
    if kind is MasterKind.KUBERNETES and not access.k8s_image:
        raise MasterError(
            "--spark-master k8s://... needs the executors' container image: pass --spark-kubernetes-image IMAGE "
            "(an image with the Python and pyspark version this driver runs; docs/clusters.md)"
        )
    if kind is MasterKind.YARN and not (environ.get("HADOOP_CONF_DIR") or environ.get("YARN_CONF_DIR")):
        raise MasterError(
            "--spark-master yarn needs the cluster's configuration: set HADOOP_CONF_DIR (or YARN_CONF_DIR) to "
            "the directory with its yarn-site.xml and core-site.xml"
        )
