"""A gate on a Spark standalone cluster of several hosts: the master and two workers each in a network
namespace of its own with its own address (tests/netns_hosts.py), reached only at those addresses; the
workers in mount namespaces where the project's packages show empty, so that the job's code reaches the
executors only by being shipped. The driver runs in pytest's namespace, the Kafka broker listens on its
address there. A gate sub-experiment runs end to end; a worker host whose link goes silent mid-run makes it
ERRORED, never a FAIL or a pass."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

import pytest_theodolite
import theodolite_generator
import theodolite_spark_jobs
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafka
from pytest_theodolite.infra.maven import java_executable
from pytest_theodolite.infra.ports import free_port
from pytest_theodolite.infra.spark.jars import pyspark_home
from pytest_theodolite.infra.waiting import wait_until

sys.path.insert(0, str(Path(__file__).parent))  # netns_hosts
from netns_hosts import HostNetwork, can_make_namespaces
from udf_job_package import write_job_package

pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

_WHY_NOT = can_make_namespaces() if os.geteuid() == 0 else "needs root for network namespaces"
needs_namespaces = pytest.mark.skipif(_WHY_NOT is not None, reason=f"no network namespaces here: {_WHY_NOT}")

MASTER, WORKERS = 0, (1, 2)

GATE = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite import Benchmark
from clickjob.job import start_query

CLICKS = Benchmark("clicks-multi-host", start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(CLICKS, loads=[200], resources=[{resources}], threshold="20%", max_duration=40)
def test_clicks(theodolite_gate):
    theodolite_gate.check()
"""


def _spark_env(network: HostNetwork, host: int, work: Path) -> dict[str, str]:
    # the host's JVMs (its executors too) keep their temp files in its work dir, not in the shared /tmp: a host
    # removed mid-run SIGKILLs them, and what a JVM meant to delete at exit (lz4-java's native library) would
    # stay behind
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "SPARK_HOME": str(pyspark_home()),
        "SPARK_LOCAL_IP": network.address(host),
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "work"),
        "SPARK_LOCAL_DIRS": str(work / "local"),
        "JAVA_HOME": str(Path(os.path.realpath(java_executable())).parent.parent),
        "PYTHONPATH": "",
        "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={work / 'tmp'}",
    }


@pytest.fixture
def hosts(tmp_path):
    """The network, a master on host 0 and a one-core worker on hosts 1 and 2 (project packages hidden), and
    a broker on this process's address; all stopped and deleted afterwards."""
    packages = (theodolite_spark_jobs, pytest_theodolite, theodolite_generator)
    project_packages = [Path(module.__file__).parent for module in packages]
    spark_class = str(pyspark_home() / "bin" / "spark-class")
    with HostNetwork(hosts=3) as network:
        master_url = f"spark://{network.address(MASTER)}:7077"
        network.run(
            MASTER,
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                network.address(MASTER),
                "--port",
                "7077",
                "--webui-port",
                "8080",
            ],
            tmp_path / "master.log",
            _spark_env(network, MASTER, tmp_path / "master"),
        )
        for host in WORKERS:
            network.run(
                host,
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    network.address(host),
                    "--cores",
                    "1",
                    "--memory",
                    "2g",
                    "--webui-port",
                    "8081",
                    master_url,
                ],
                tmp_path / f"worker-{host}.log",
                _spark_env(network, host, tmp_path / f"worker-{host}"),
                hidden=project_packages,
            )
        port, controller = free_port(), free_port()
        broker = EmbeddedKafka(
            port=port,
            controller_port=controller,
            work_dir=tmp_path / "kafka",
            server_properties={
                "listeners": f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://127.0.0.1:{controller}",
                "advertised.listeners": f"PLAINTEXT://{network.local_address}:{port}",
            },
        )
        with broker:
            wait_until(
                lambda: _alive_workers(network) == len(WORKERS),
                timeout_s=120,
                interval_s=0.5,
                transient=(OSError, ValueError),
                what=lambda: f"{len(WORKERS)} workers registered; logs in {tmp_path}",
            )
            yield network, master_url, f"{network.local_address}:{port}"
    assert network.leftovers() == []


def _alive_workers(network: HostNetwork) -> int:
    import urllib.request

    url = f"http://{network.address(MASTER)}:8080/json/"
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response).get("aliveworkers", 0)


def _run_gate(pytester, master_url: str, bootstrap: str, network: HostNetwork, resources: int):
    write_job_package(pytester.path)
    pytester.makepyfile(test_clicks_gate=GATE.format(resources=resources))
    checkpoints = pytester.path.parent / "shared-checkpoints"  # a path every host mounts
    checkpoints.mkdir(exist_ok=True)
    args = (
        *_cluster_args(bootstrap, master_url, network, checkpoints),
        "--theodolite-update-baselines",  # a first run on this cluster: it measures and records
        "-rA",
    )
    return pytester.runpytest_subprocess(*args, timeout=900), checkpoints


@needs_namespaces
def test_a_worker_host_gone_silent_mid_run_makes_the_point_errored_never_a_fail(pytester, hosts, monkeypatch):
    """A worker host's link dropped while the point is measured, its executor still running: Spark would notice
    only after its heartbeat timeout (120 s), and the stalled query reads as a growing lag -- a FAIL of the job,
    a false regression. The runner asks every executor when the measurement ends: the point is ERRORED."""
    network, master_url, bootstrap = hosts
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    results = pytester.path / "results"
    silenced = threading.Event()

    def silence_when_measuring() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            for path in results.glob("*_lag-trend_*.csv") if results.is_dir() else ():
                if len(path.read_text().splitlines()) > 8:
                    network.silence_host(WORKERS[-1])
                    silenced.set()
                    return
            time.sleep(0.2)

    watcher = threading.Thread(target=silence_when_measuring, daemon=True)
    watcher.start()
    result, _ = _run_gate(pytester, master_url, bootstrap, network, resources=2)
    watcher.join(timeout=5)
    output = result.stdout.str() + result.stderr.str()
    print(output)
    assert silenced.is_set(), "no sub-experiment measured: the host was never silenced"
    recorded = json.loads(next(results.glob("*_results.json")).read_text())
    [sub] = recorded["sub_experiments"]
    assert sub["outcome"] == "errored", sub
    details = " ".join(v.get("detail", "") for v in sub["verdicts"])
    assert f"an executor stopped answering ({network.address(WORKERS[-1])}:" in details, details
    assert result.parseoutcomes().get("passed", 0) == 0, output


BROKEN_SCORING = """
def score(value):
    raise RuntimeError("this version of the scoring breaks on the executors")
"""


@needs_namespaces
def test_pull_request_mode_ships_each_sides_own_version_to_the_executors(pytester, hosts, monkeypatch):
    """REF's scoring works, the working tree's raises on the executors: REF measures, the change's point
    errors. Each side's executors ran that side's code -- the package shipped from its own tree. REF's point is
    a gate on a cluster of hosts that share no Python path: two instances, one on each worker host, its UDF run
    from the shipped package, each checkpoint deleted under the shared root and no topic left."""
    import subprocess

    network, master_url, bootstrap = hosts
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(pytester.path), *args], check=True, capture_output=True)

    job = write_job_package(pytester.path)
    pytester.makepyfile(test_clicks_gate=GATE.format(resources=2))
    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    git("add", "-A")
    git("commit", "-qm", "base")
    (job / "scoring.py").write_text(BROKEN_SCORING)  # the change, uncommitted
    checkpoints = pytester.path.parent / "shared-checkpoints"
    checkpoints.mkdir(exist_ok=True)
    result = pytester.runpytest_subprocess(
        *_cluster_args(bootstrap, master_url, network, checkpoints),
        "--theodolite-compare-ref=main",
        "--theodolite-paired-cost=false",  # the executors' import is the point here, not the paired read
        "-rA",
        timeout=900,
    )
    output = result.stdout.str() + result.stderr.str()
    print(output)
    sides, recorded = {}, {}
    for side in ("ref", "change"):
        recorded[side] = json.loads(
            next((pytester.path / "results" / side).glob("*_results.json")).read_text()
        )
        sides[side] = {sub["outcome"] for sub in recorded[side]["sub_experiments"]}
    assert sides["ref"] <= {"pass", "fail"} and sides["ref"], sides  # REF's own scoring ran on the executors
    assert {sub["resources"] for sub in recorded["ref"]["sub_experiments"]} == {2}, recorded["ref"]
    assert recorded["ref"]["settings"]["job"] == "clickjob.job.start_query"
    assert "ModuleNotFoundError" not in output
    assert list(checkpoints.iterdir()) == []  # each repetition's checkpoint deleted under the shared root
    operator = KafkaCluster(bootstrap, provider="external")
    assert not [t for t in operator.list_topics() if t.startswith("theodolite-")]
    operator.close()
    assert sides["change"] == {"errored"}, sides  # the change's, shipped from the working tree, raised there
    assert "this version of the scoring breaks on the executors" in output
    assert result.parseoutcomes().get("passed", 0) == 0, output  # never a pass without the change measured


def _cluster_args(bootstrap: str, master_url: str, network, checkpoints) -> tuple[str, ...]:
    """pytest's options for a gate on the namespaces' Kafka and Spark cluster, two instances at most."""
    return (
        "-p",
        "no:cacheprovider",
        "--kafka=external",
        f"--kafka-bootstrap={bootstrap}",
        f"--spark-master={master_url}",
        f"--spark-driver-host={network.local_address}",
        f"--theodolite-checkpoint-root={checkpoints}",
        "--theodolite-max-instances=2",
        "--theodolite-results=results",
    )
