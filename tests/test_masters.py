"""The settings each kind of Spark master gets for r instances, checked against Spark's documented
configuration (docs: running-on-kubernetes.md, running-on-yarn.md, spark-standalone.md), and the registration
check -- without a cluster: the session builder is recorded, the executors scripted."""

from __future__ import annotations

import os
import sys
import zipfile
from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra.spark import executors as executors_module
from pytest_theodolite.infra.spark import shipping
from pytest_theodolite.infra.spark.cluster import SparkCluster
from pytest_theodolite.infra.spark.masters import (
    ClusterAccess,
    MasterError,
    MasterKind,
    access_settings,
    cpu_limit_mechanism,
    master_kind,
    sizing_settings,
)


@pytest.mark.parametrize(
    "master, kind",
    [
        ("standalone", MasterKind.MANAGED),
        ("local-cluster", MasterKind.LOCAL_CLUSTER),
        ("spark://10.0.0.5:7077", MasterKind.STANDALONE),
        ("k8s://https://10.0.0.1:6443", MasterKind.KUBERNETES),
        ("yarn", MasterKind.YARN),
    ],
)
def test_master_kinds(master, kind):
    assert master_kind(master) is kind


@pytest.mark.parametrize("master", ["sc://localhost:15002", "local", "local[*]", "mesos://m:5050", "laptop"])
def test_masters_whose_executors_cannot_be_sized_are_refused(master):
    with pytest.raises(MasterError, match="--spark-master"):
        master_kind(master)


def test_standalone_masters_get_a_core_cap_of_one_core_executors():
    for kind in (MasterKind.MANAGED, MasterKind.LOCAL_CLUSTER, MasterKind.STANDALONE):
        settings = sizing_settings(kind, 3, 0.25)
        # standalone ignores spark.executor.instances: r cores of one-core executors are r executors
        assert settings["spark.cores.max"] == "3" and settings["spark.executor.cores"] == "1"
        assert "spark.executor.instances" not in settings
        assert not any(key.startswith("spark.kubernetes.") for key in settings)
        assert settings["spark.dynamicAllocation.enabled"] == "false"


def test_kubernetes_gets_executor_instances_and_the_pods_cpu_request_and_limit():
    settings = sizing_settings(MasterKind.KUBERNETES, 2, 0.25)
    assert settings["spark.executor.instances"] == "2"
    assert settings["spark.executor.cores"] == "1"  # one task slot per instance
    # request <= limit, or Kubernetes refuses the pods (SPARK-52933): both the instance's share
    assert settings["spark.kubernetes.executor.request.cores"] == "0.25"
    assert settings["spark.kubernetes.executor.limit.cores"] == "0.25"
    assert "spark.cores.max" not in settings
    unlimited = sizing_settings(MasterKind.KUBERNETES, 2, None)
    assert "spark.kubernetes.executor.limit.cores" not in unlimited


def test_yarn_gets_executor_instances_and_no_cpu_share():
    settings = sizing_settings(MasterKind.YARN, 4, 0.5)
    assert settings["spark.executor.instances"] == "4" and settings["spark.executor.cores"] == "1"
    assert cpu_limit_mechanism(MasterKind.YARN, cgroups_available=True) is None


def test_cpu_limits_where_a_cluster_has_them():
    assert cpu_limit_mechanism(MasterKind.MANAGED, cgroups_available=True) == "cgroups"
    assert cpu_limit_mechanism(MasterKind.MANAGED, cgroups_available=False) is None
    assert cpu_limit_mechanism(MasterKind.KUBERNETES, cgroups_available=False) == "Kubernetes pod CPU limit"
    assert cpu_limit_mechanism(MasterKind.STANDALONE, cgroups_available=True) is None


def test_the_driver_address_is_loopback_only_on_clusters_started_here():
    assert access_settings(MasterKind.MANAGED, ClusterAccess(driver_host="10.9.9.9")) == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    assert access_settings(MasterKind.STANDALONE, ClusterAccess()) == {}  # Spark's choice
    remote = access_settings(MasterKind.YARN, ClusterAccess(driver_host="10.9.9.9"))
    assert remote == {"spark.driver.host": "10.9.9.9", "spark.driver.bindAddress": "10.9.9.9"}
    k8s = access_settings(
        MasterKind.KUBERNETES,
        ClusterAccess(driver_host="gate-driver.ci.svc", k8s_image="img:1", k8s_namespace="ci"),
    )
    assert k8s["spark.kubernetes.container.image"] == "img:1"
    assert k8s["spark.kubernetes.namespace"] == "ci"
    assert k8s["spark.driver.host"] == "gate-driver.ci.svc"


class _RecordingBuilder:
    """SparkSession.builder as the session uses it; getOrCreate returns a session with `registered`
    executors."""

    def __init__(self, registered: int) -> None:
        self.settings: dict[str, str] = {}
        self.registered = registered
        self.stopped = False

    def config(self, key, value):
        self.settings[key] = value
        return self

    def getOrCreate(self):
        builder = self
        status = SimpleNamespace(size=lambda: builder.registered + 1)  # the driver is listed too
        sc = SimpleNamespace(getExecutorMemoryStatus=lambda: status)
        spark_context = SimpleNamespace(_jsc=SimpleNamespace(sc=lambda: sc), addPyFile=self.add_py_file)
        self.shipped: list[str] = []

        def stop():
            builder.stopped = True

        return SimpleNamespace(sparkContext=spark_context, stop=stop)

    def add_py_file(self, path):
        self.shipped.append(path)


def _session_settings(monkeypatch, cluster: SparkCluster, instances: int, registered: int, **kwargs):
    from pyspark.sql import SparkSession

    builder = _RecordingBuilder(registered)
    monkeypatch.setattr(SparkSession, "builder", builder)
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    with cluster.session(instances=instances, **kwargs):
        pass
    assert builder.stopped
    return builder


def test_a_kubernetes_session_asks_for_exactly_r_limited_pods(monkeypatch):
    cluster = SparkCluster(
        "k8s://https://api:6443",
        max_instances=4,
        jars=[],
        instance_cpu=0.5,
        kind=MasterKind.KUBERNETES,
        access=ClusterAccess(driver_host="10.0.0.2", k8s_image="img:1"),
    )
    builder = _session_settings(
        monkeypatch,
        cluster,
        3,
        3,
        conf={"spark.executor.instances": "9", "spark.sql.shuffle.partitions": "8"},
    )
    settings = builder.settings
    assert settings["spark.master"] == "k8s://https://api:6443"
    # a job's settings cannot change how many instances run, or how big
    assert settings["spark.executor.instances"] == "3"
    assert settings["spark.kubernetes.executor.limit.cores"] == "0.5"
    assert settings["spark.sql.shuffle.partitions"] == "8"
    assert settings["spark.driver.host"] == "10.0.0.2"
    assert cluster.limits_instance_cpu and not cluster.can_limit_cpu


def test_every_session_states_whether_it_keeps_an_event_log(monkeypatch):
    # a process's first session's settings become its JVM's defaults: a session that does not state the event
    # log would inherit a capacity measurement's (whose directory is gone by then)
    cluster = SparkCluster("spark://m:7077", max_instances=2, jars=[], kind=MasterKind.STANDALONE)
    plain = _session_settings(monkeypatch, cluster, 1, 1).settings
    assert plain["spark.eventLog.enabled"] == "false"
    asked = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": "file:///tmp/log"}
    logging = _session_settings(monkeypatch, cluster, 1, 1, conf=asked).settings
    assert logging["spark.eventLog.enabled"] == "true"
    assert logging["spark.eventLog.dir"] == "file:///tmp/log"


def test_more_executors_than_asked_for_is_a_setup_error_naming_the_count(monkeypatch):
    cluster = SparkCluster("yarn", max_instances=4, jars=[], kind=MasterKind.YARN)
    with pytest.raises(
        TheodoliteSetupError, match="The yarn cluster gave 2 Spark executors where 1 were asked"
    ):
        _session_settings(monkeypatch, cluster, 1, 2)


def test_too_few_executors_says_what_to_check_on_that_cluster(monkeypatch):
    cluster = SparkCluster(
        "spark://m:7077", max_instances=4, jars=[], kind=MasterKind.STANDALONE, register_timeout_s=0.2
    )
    with pytest.raises(TheodoliteSetupError, match=r"Only 1 of 2 .*--spark-driver-host"):
        _session_settings(monkeypatch, cluster, 2, 1)


def test_the_jobs_files_are_shipped_and_the_drivers_path_left_as_it_was(monkeypatch, tmp_path):
    import sys

    before = list(sys.path)
    cluster = SparkCluster("spark://m:7077", max_instances=2, jars=[], kind=MasterKind.STANDALONE)
    archive = tmp_path / "job.zip"
    builder = _session_settings(monkeypatch, cluster, 1, 1, py_files=[archive])
    assert builder.shipped == [str(archive)]
    assert sys.path == before


def test_a_jobs_package_is_zipped_with_its_modules_and_a_single_module_copied(tmp_path):
    archive = shipping.job_archive("theodolite_spark_jobs.uc1", tmp_path)
    with zipfile.ZipFile(archive) as bundle:
        names = set(bundle.namelist())
    assert archive.name == "theodolite_spark_jobs.zip"
    assert {
        "theodolite_spark_jobs/__init__.py",
        "theodolite_spark_jobs/uc1.py",
        "theodolite_spark_jobs/common.py",
    } <= names
    assert not [n for n in names if "__pycache__" in n or not n.endswith(".py")]
    module = tmp_path / "single" / "my_clicks_job.py"
    module.parent.mkdir()
    module.write_text("def start_query(spark, **options):\n    return None\n")
    sys_path = __import__("sys").path
    sys_path.insert(0, str(module.parent))
    try:
        copied = shipping.job_archive("my_clicks_job", tmp_path)
    finally:
        sys_path.remove(str(module.parent))
    assert copied.name == "my_clicks_job.py" and copied.read_text() == module.read_text()


def test_executors_of_a_cluster_started_here_get_the_jobs_tree_on_their_path(monkeypatch, tmp_path):
    """A job imported from the directory pytest runs in (not installed): its tree, and the plugin's where it is
    not installed either, go first on the executors' path, then the environment's own; installed packages
    are on every process's path already and are left off."""
    package = tmp_path / "checkout" / "my_jobs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "clicks.py").write_text("def start_query(spark, **options):\n    return None\n")
    single = tmp_path / "single" / "my_single_module_job.py"
    single.parent.mkdir()
    single.write_text("def start_query(spark, **options):\n    return None\n")
    for directory in (package.parent, single.parent):
        monkeypatch.syspath_prepend(str(directory))
    assert shipping.import_root("my_jobs.clicks") == package.parent.resolve()
    assert shipping.import_root("my_single_module_job") == single.parent.resolve()
    assert shipping.import_root("sys") is None  # built in: nothing to put on a path
    plugin_root = shipping.import_root("pytest_theodolite")
    monkeypatch.setattr(shipping, "_site_directories", lambda: {plugin_root})  # as if pip-installed
    path = shipping.executor_python_path(
        ["my_jobs.clicks", "pytest_theodolite.engine.runner"], {"PYTHONPATH": f"/opt/extra{os.pathsep}"}
    )
    assert path.split(os.pathsep) == [str(package.parent.resolve()), "/opt/extra"]
    monkeypatch.setattr(shipping, "_site_directories", set)  # a checkout, not installed
    path = shipping.executor_python_path(["my_jobs.clicks", "pytest_theodolite", "my_jobs"], {})
    assert path.split(os.pathsep) == [str(package.parent.resolve()), str(plugin_root)]
    assert shipping.executor_python_path(["sys"], {}) == ""  # nothing to add: the setting is left unset


@pytest.mark.parametrize(
    "location, local",
    [
        ("/mnt/shared/ckpt", True),
        ("file:///mnt/shared/ckpt", True),
        ("hdfs://nn:8020/ckpt", False),
        ("s3a://b/c", False),
    ],
)
def test_checkpoints_on_the_clusters_file_system_are_deleted_through_it(location, local):
    assert shipping.is_local_path(location) is local
    assert (
        shipping.checkpoint_location(location + "/", "gate-1-checkpoint") == f"{location}/gate-1-checkpoint"
    )


def test_the_registration_hints_cover_every_kind():
    assert set(executors_module._REGISTRATION_HINTS) == set(MasterKind)


DRIVER, OLD, NEW = "127.0.0.1:40000", "127.0.0.1:41000", "127.0.0.1:42000"


@pytest.mark.parametrize(
    "ids, addresses, replaced",
    [
        (["0"], {DRIVER, OLD}, False),  # not killed yet
        ([], {DRIVER, OLD}, False),  # the scheduler forgot the old one, its block manager is still listed
        (["1"], {DRIVER, OLD}, False),  # the new one registered, its block manager not yet: the old is listed
        (["1"], {DRIVER, OLD, NEW}, False),  # both block managers listed
        (["1"], {DRIVER, "127.0.0.1:0"}, False),  # the new block manager has no port yet
        ([], {DRIVER, NEW}, False),
        (["1"], {DRIVER, NEW}, True),
    ],
)
def test_an_executor_is_replaced_once_the_old_ones_block_manager_is_gone_and_the_new_one_has_its_port(
    ids, addresses, replaced
):
    assert executors_module.has_replaced("0", frozenset({DRIVER, OLD}), ids, frozenset(addresses)) is replaced


class ScriptedExecutor:
    """A session whose one executor answers the Python probe: with `answer`, or by running it here."""

    def __init__(self, answer=None):
        self.answer = answer
        self.sparkContext = self

    def parallelize(self, data, slices):
        self.data = data
        return self

    def map(self, function):
        self.function = function
        return self

    def collect(self):
        return [self.answer] if self.answer is not None else [self.function(x) for x in self.data]


def test_the_executors_python_is_probed_in_their_own_worker():
    version, executable, missing = executors_module.executor_python(
        ScriptedExecutor(), ["json", "no_such_package_of_theirs"]
    )
    assert version == f"{sys.version_info.major}.{sys.version_info.minor}" and executable == sys.executable
    assert missing == ["no_such_package_of_theirs"]


def test_executors_on_another_python_are_a_setup_error_and_missing_packages_a_warning():
    from pytest_theodolite.core.errors import TheodoliteSetupWarning

    ours = f"{sys.version_info.major}.{sys.version_info.minor}"
    executors_module.check_executor_python(ScriptedExecutor((ours, "/usr/bin/python3", [])), ["pandas"])
    with pytest.raises(TheodoliteSetupError) as other:
        executors_module.check_executor_python(ScriptedExecutor(("3.8", "/usr/bin/python3", [])), [])
    assert f"the executors run Python 3.8 (/usr/bin/python3), this driver Python {ours}" in str(other.value)
    assert "set PYSPARK_PYTHON" in str(other.value)
    # a job that runs wholly in the JVM never imports its module's packages on the executors: named, not refused
    with pytest.warns(
        TheodoliteSetupWarning, match=r"\(/opt/py/bin/python\) cannot import pandas, pyarrow, which"
    ):
        executors_module.check_executor_python(
            ScriptedExecutor((ours, "/opt/py/bin/python", ["pandas", "pyarrow"])), ["pandas", "pyarrow"]
        )


class NoPythonOnExecutors(ScriptedExecutor):
    def collect(self):
        raise RuntimeError('Cannot run program "python3": error=2, No such file or directory\n\tat java...')


def test_executors_that_cannot_start_python_are_a_setup_error_with_sparks_reason():
    with pytest.raises(
        TheodoliteSetupError, match=r'could not run this driver\'s Python \(Cannot run program "python3"'
    ):
        executors_module.check_executor_python(NoPythonOnExecutors(), [])


def test_only_clusters_not_started_here_have_their_executors_python_checked(monkeypatch):
    sessions = []
    for master, kind in (("spark://m:7077", MasterKind.STANDALONE), ("local-cluster[2,1,1024]", None)):
        cluster = SparkCluster(master, max_instances=2, jars=[], kind=kind or MasterKind.LOCAL_CLUSTER)
        monkeypatch.setattr(
            cluster, "session", lambda **kw: sessions.append(kw) or nullcontext(ScriptedExecutor())
        )
        cluster.check_executor_python(["json"])
    assert [s["app_name"] for s in sessions] == ["theodolite-executor-python"]  # the standalone master's only
