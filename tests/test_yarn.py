"""A gate on YARN, live: Hadoop's mini YARN and HDFS cluster (tests/yarn_cluster.py) started for this module,
the gate run with `--spark-master yarn` against it -- its instances are executors in YARN containers, its
checkpoints on HDFS and deleted after each run -- and a queue that admits nothing refused at once."""

import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # yarn_cluster
from yarn_cluster import MiniYarn, mini_yarn

from pytest_theodolite.infra.maven import default_cache_dir
from pytest_theodolite.infra.spark.jars import pyspark_home

# a whole gate run that measures: under pytest-xdist nothing else may run beside it
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

GATE = """
import pytest
from pytest_theodolite import Benchmark, Workload
from theodolite_spark_jobs import uc1

UC1 = Benchmark("uc1-yarn", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[500], resources=[2], warmup=5, duration=10, max_duration=20)
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""
CHECKPOINTS = "/theodolite-checkpoints"


@pytest.fixture(scope="module")
def yarn(tmp_path_factory) -> MiniYarn:
    if shutil.which("javac") is None:
        pytest.skip("no javac: the mini YARN cluster's class is compiled here (install a JDK 17)")
    with mini_yarn(tmp_path_factory.mktemp("yarn"), default_cache_dir()) as cluster:
        yield cluster


def yarn_run(pytester: pytest.Pytester, yarn: MiniYarn, monkeypatch, *options: str):
    monkeypatch.setenv("HADOOP_CONF_DIR", str(yarn.conf_dir))
    pytester.makepyfile(test_uc1_yarn=GATE)
    return pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--spark-master=yarn",
        f"--theodolite-checkpoint-root={yarn.fs}{CHECKPOINTS}",
        # the executors' jars from this host's pyspark (every node of a real cluster would need them there; a
        # cluster's own are named with spark.yarn.archive): else each session uploads them, 442 MB
        f"--spark-conf=spark.yarn.jars=local:{pyspark_home() / 'jars'}/*",
        "--theodolite-results=results",
        *options,
        timeout=900,
    )


class ContainerWatch(threading.Thread):
    """The most Spark containers YARN ran at once while a run went on."""

    def __init__(self, yarn: MiniYarn):
        super().__init__(daemon=True)
        self.yarn, self.most, self.done = yarn, {"application_masters": 0, "executors": 0}, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            now = self.yarn.containers()
            if now["executors"] > self.most["executors"]:
                self.most = now

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join()


def test_a_gate_point_is_measured_on_yarn_its_instances_in_containers_its_checkpoints_deleted(
    pytester, yarn, monkeypatch
):
    """Which verdict the point reaches depends on the host; that it reached one on YARN's executors does not."""
    with ContainerWatch(yarn) as watch:
        result = yarn_run(pytester, yarn, monkeypatch, "--theodolite-update-baselines")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1 and "errors" not in outcomes, outcomes
    result.stdout.fnmatch_lines(["*spark master=yarn*", "*uc1-yarn load=500 instances=2: PASS*"])
    # the point's two instances were two executors in YARN containers, beside the application's master
    assert watch.most == {"application_masters": 1, "executors": 2}, watch.most
    assert yarn.containers() == {"application_masters": 0, "executors": 0}  # and none is left
    # each repetition's checkpoint on HDFS was deleted after it
    assert yarn.listing(CHECKPOINTS) == []


def test_a_queue_that_admits_nothing_is_a_setup_error_at_once(pytester, yarn, monkeypatch):
    started = time.monotonic()
    result = yarn_run(
        pytester, yarn, monkeypatch, "--spark-conf=spark.yarn.queue=closed", "--theodolite-update-baselines"
    )
    took = time.monotonic() - started
    assert result.ret not in (0, 1), result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(
        [
            "*Spark could not start a session on yarn: *Queue root.closed is STOPPED*Check the application in YARN*"
        ]
    )
    assert (
        "Py4JJavaError" not in result.stdout.str()
    )  # the reason, not py4j's wrapper (Spark still logs its own)
    assert took < 120, took  # refused by the ResourceManager, not waited out
