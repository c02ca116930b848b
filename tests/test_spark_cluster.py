"""The spark_cluster fixture: real executor JVMs, the Kafka connector, per-instance CPU quotas."""

import os
from pathlib import Path

import pytest
from kafka import KafkaProducer

from pytest_theodolite.infra.spark import cgroups
from pytest_theodolite.infra.spark.cluster import SparkCluster, StandaloneCluster
from pytest_theodolite.infra.spark.executors import driver_jvm_pid, registered_executors

pytestmark = pytest.mark.integration


def test_streaming_query_on_two_instances_copies_every_record(kafka_cluster, spark_cluster, tmp_path):
    records = 5_000
    kafka_cluster.create_topic("copy-in", partitions=4)
    kafka_cluster.create_topic("copy-out", partitions=4)
    producer = KafkaProducer(**kafka_cluster.client_kwargs(), linger_ms=20)
    for i in range(records):
        producer.send("copy-in", key=b"k%d" % (i % 100), value=b"%d" % i)
    producer.flush()
    producer.close()

    with spark_cluster.session(instances=2) as spark:
        assert registered_executors(spark) == 2
        assert spark.conf.get("spark.cores.max") == "2"
        query = (
            spark.readStream.format("kafka")
            .options(**kafka_cluster.spark_options())
            .option("subscribe", "copy-in")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
            .writeStream.format("kafka")
            .options(**kafka_cluster.spark_options())
            .option("topic", "copy-out")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "the availableNow query did not finish within 180 s"
        assert query.exception() is None
        executors = {e.executorId for e in spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()}
        # the driver's JVM, whose CPU the host report counts as the driver's (core/contention.py)
        driver_pid = driver_jvm_pid(spark)
        assert driver_pid is not None
        assert b"SparkSubmit" in Path(f"/proc/{driver_pid}/cmdline").read_bytes()
    assert kafka_cluster.total_end_offset("copy-out") == records
    assert len(executors) == 3  # two executors and the driver


def test_session_refuses_more_instances_than_the_cluster_has(spark_cluster):
    with pytest.raises(ValueError, match=r"instances=99 is outside 1\.\.\d+"):
        with spark_cluster.session(instances=99):
            pass


@pytest.mark.skipif(not cgroups.detect().available, reason=f"no cgroups here: {cgroups.detect().reason}")
def test_each_instance_runs_in_its_own_cgroup_with_the_configured_quota():
    with StandaloneCluster(workers=2, instance_cpu=0.25) as cluster:
        groups = cluster.instance_groups
        assert groups is not None and len(groups.groups) == 2
        workers = cluster.processes[1:]
        for group, worker in zip(groups.groups, workers, strict=True):
            quota = group.quota_file.read_text().split()
            assert int(quota[0]) == 25_000  # 0.25 of a 100 ms period
            assert str(worker.pid) in (group.path / "cgroup.procs").read_text().split()
        # a session of another benchmark changes the share of the same running instances
        cluster_view = SparkCluster(cluster.master_url, 2, jars=[], instance_groups=groups.groups)
        cluster_view.set_instance_cpu(0.5)
        assert [int(g.quota_file.read_text().split()[0]) for g in groups.groups] == [50_000, 50_000]
        cluster_view.set_instance_cpu(None)
        assert {g.quota_file.read_text().split()[0] for g in groups.groups} <= {"-1", "max"}
        parent = groups.parent
    assert not parent.exists(), "the instance cgroups must be removed when the cluster stops"


def test_executors_python_workers_import_pyspark_from_the_package_not_from_sparks_archives(spark_cluster):
    """On the plugin's cluster the executors' Python workers leave Spark's archives off their path (they made
    every task re-read them on Python 3.11) and still import the same pyspark."""
    import pyspark

    def worker_view(_):
        import os
        import sys

        import pyspark as worker_pyspark

        home = os.environ["SPARK_HOME"]
        yield (
            worker_pyspark.__file__,
            [entry for entry in sys.path if entry.startswith(home) and entry.endswith((".zip", ".jar"))],
        )

    with spark_cluster.session(instances=1) as spark:
        [(pyspark_file, archives)] = (
            spark.sparkContext.parallelize([0], 1).mapPartitions(worker_view).collect()
        )
    assert pyspark_file == pyspark.__file__  # the installed package, not python/lib/pyspark.zip/pyspark
    assert archives == []


def test_the_executors_run_the_python_that_runs_pytest_unless_pyspark_python_names_another(
    spark_cluster, tmp_path, monkeypatch
):
    """A venv's interpreter run by path (not activated) leaves ``python3`` on the PATH another interpreter: on
    the plugin's cluster the executors run the one running pytest; a user's ``PYSPARK_PYTHON`` is kept."""
    import sys

    def executable(spark) -> str:
        return spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect()[0]

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    with spark_cluster.session(instances=1) as spark:
        assert spark.sparkContext.pythonExec == sys.executable
        assert executable(spark) == sys.executable
    assert "PYSPARK_PYTHON" not in os.environ  # set for the context's start only
    users_python = tmp_path / "users-python"
    users_python.symlink_to(sys.executable)
    monkeypatch.setenv("PYSPARK_PYTHON", str(users_python))
    with spark_cluster.session(instances=1) as spark:
        assert executable(spark) == str(users_python)


def test_a_checkpoint_on_the_clusters_file_system_is_deleted_through_the_sessions_hadoop_client(
    spark_cluster, tmp_path
):
    """The path --theodolite-checkpoint-root takes for hdfs:// or s3a:// roots, here on Hadoop's own local file
    system (file://): the same FileSystem.delete call, a real session."""
    from pytest_theodolite.infra.spark import shipping

    checkpoint = tmp_path / "root" / "theodolite-1a2b3c4d-checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1\n")
    with spark_cluster.session(instances=1) as spark:
        shipping.delete_checkpoint(spark, f"file://{checkpoint}")
    assert not checkpoint.exists() and (tmp_path / "root").exists()
