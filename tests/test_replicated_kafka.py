"""A gate against a replicated Kafka cluster that pytest did not start: three KRaft brokers, each its own JVM
(the embedded broker's jars), topics at replication factor 3 and min.insync.replicas 2. One broker is
SIGKILLed while a sub-experiment measures: the sub-experiment completes or is ERRORED -- never loses a record
the broker acknowledged to the generator (the runner counts both and errors a repetition that did) -- and the
gate's topics are deleted on the two brokers left. And the case that protection is for: a topic at replication
factor 2 and min.insync.replicas 1 whose leader is killed while its follower is out of the ISR, the follower
then elected uncleanly -- records the broker acknowledged are gone, and the loss check says so."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import KafkaError

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.core.estimators import SlopeThreshold
from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.kafka.embedded import EmbeddedKafkaCluster
from pytest_theodolite.infra.waiting import wait_until
from theodolite_generator import Workload
from theodolite_spark_jobs import uc1

# kills a broker while measuring: nothing else may run beside it under pytest-xdist
pytestmark = [pytest.mark.integration, pytest.mark.theodolite_exclusive]

GATE = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite.engine.runner import Benchmark
from theodolite_spark_jobs import uc1

UC1 = Benchmark("uc1-replicated", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=3)

@pytest.mark.theodolite(UC1, loads=[500], resources=[1, 2], threshold="20%", max_duration=40)
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""


BASELINE = {
    "benchmark": "uc1-replicated",
    "format_version": 1,
    "settings": {},
    "demand": {"500": 1},
    "testbed": {
        "cores": None,
        "memory_gib": None,
        "instance_cpu": None,
        "kafka_provider": "external",
        "spark_master": "standalone",
        "pyspark_version": None,
        "python_version": "3.11",
    },
}


def outside_captured_logs(output: str) -> str:
    """A pytest run's output without its "Captured log" sections: there kafka-python's own log records of the
    dead broker's socket (one, "Error receiving network data", comes with its traceback) are shown for an
    errored point -- the client's logging, not a crash."""
    kept, in_log = [], False
    for line in output.splitlines():
        if line.startswith("-") and " Captured log " in line:
            in_log = True
        elif in_log and line.startswith(("-----", "=====", "_____")):
            in_log = False
        if not in_log:
            kept.append(line)
    return "\n".join(kept)


def _kill_when_measuring(
    results: Path, broker_pid: int, killed: threading.Event, stop: threading.Event
) -> None:
    """SIGKILL the broker once a sub-experiment has sampled 8 lags (past its priming)."""
    while not stop.is_set():
        for path in results.glob("*_lag-trend_*.csv") if results.is_dir() else ():
            if len(path.read_text().splitlines()) > 8:
                os.killpg(broker_pid, signal.SIGKILL)
                killed.set()
                return
        time.sleep(0.2)


def test_a_gate_on_a_replicated_cluster_survives_a_killed_broker_without_losing_acknowledged_records(
    pytester, tmp_path
):
    with EmbeddedKafkaCluster(3, work_dir=tmp_path / "operator-kafka") as cluster:
        operator = KafkaCluster(cluster.bootstrap_servers, provider="external")
        assert operator.broker_count() == 3
        victim = cluster.brokers[1]
        assert victim.process is not None
        pytester.makepyfile(test_uc1_replicated=GATE)
        (pytester.path / "baselines").mkdir()
        (pytester.path / "baselines" / "uc1-replicated.json").write_text(json.dumps(BASELINE))
        results = pytester.path / "results"
        killed, stop = threading.Event(), threading.Event()
        watcher = threading.Thread(
            target=_kill_when_measuring, args=(results, victim.process.pid, killed, stop), daemon=True
        )
        watcher.start()
        started = time.monotonic()
        try:
            result = pytester.runpytest_subprocess(
                "-p",
                "no:cacheprovider",
                "--kafka=external",
                f"--kafka-bootstrap={cluster.bootstrap_servers}",
                "--kafka-min-insync-replicas=2",
                "--theodolite-max-instances=2",
                "--theodolite-results=results",
                "-rA",
            )
        finally:
            stop.set()
            watcher.join(timeout=5)
        took = time.monotonic() - started
        output = result.stdout.str() + result.stderr.str()
        print(output)  # what the user sees (pytest -rP shows it)
        assert killed.is_set(), "the broker was never killed: no sub-experiment measured"
        assert not victim.process.alive()
        outcomes = result.parseoutcomes()
        # a verdict, or a point the plugin could not measure because the broker went away -- never a crash
        if outcomes.get("errors", outcomes.get("error", 0)):
            assert "could not measure the demand of uc1-replicated" in output, output
            assert "the broker did not answer" in output or "the query stopped" in output, output
        else:
            assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1, output
        assert "Traceback" not in outside_captured_logs(output), output
        recorded = json.loads(next(results.glob("*_results.json")).read_text())
        repetitions = [r for sub in recorded["sub_experiments"] for r in sub["repetitions"]]
        assert repetitions
        for repetition in repetitions:
            assert repetition["outcome"] in ("pass", "fail", "errored"), repetition
            details = " ".join(v.get("detail", "") for v in repetition["verdicts"])
            assert "acknowledged records were lost" not in details, details
            # counted after the generator stopped, on the two brokers left (new leaders within ~10 s)
            counters = repetition["counters"]
            assert counters["records_in_input_topic"] >= counters["records_acknowledged"] > 0, counters
        # the topics were created at replication factor 3, min ISR 2, and deleted on the brokers left
        assert "replication factor 3" not in output  # no refusal

        # deleted: each broker applies the deletion in its own time, so ask until the one asked agrees
        def gate_topics() -> list[str]:
            return sorted(t for t in operator.list_topics() if t.startswith("theodolite-"))

        wait_until(
            lambda: not gate_topics(),
            timeout_s=30,
            transient=(KafkaError,),
            what=lambda: f"gate topics left: {gate_topics()}",
        )
        assert all(b.process is not None and b.process.alive() for b in cluster.brokers if b is not victim)
        assert took < 600, took
        operator.close()


def replica_counts(kafka: KafkaCluster, name: str) -> list[int]:
    [described] = kafka.admin.describe_topics([name])
    return sorted(len(p["replica_nodes"]) for p in described.get("partitions") or [])


def topic_config(kafka: KafkaCluster, name: str) -> dict[str, dict]:
    """The topic's settings that differ from the broker's defaults, as one broker describes them."""
    resource = ConfigResource(ConfigResourceType.TOPIC, name, configs=["min.insync.replicas"])
    return kafka.admin.describe_configs(config_resources=[resource]).get("topic", {}).get(name, {})


def test_gate_topics_are_replicated_as_the_cluster_allows(tmp_path):
    with EmbeddedKafkaCluster(3, work_dir=tmp_path / "kafka") as cluster:
        kafka = KafkaCluster(cluster.bootstrap_servers, provider="external", min_insync_replicas=2)
        try:
            assert kafka.gate_topic_replication() == 3  # the brokers, up to 3
            name = kafka.gate_topic_name("r1", "input")
            kafka.create_gate_topic(name, 3)
            # the broker asked may not yet have applied the new topic's metadata (KRaft spreads it
            # asynchronously; create_gate_topic waited on one broker's view): ask until one answers
            wait_until(
                lambda: replica_counts(kafka, name) == [3, 3, 3],
                timeout_s=30,
                transient=(KafkaError,),
                what=lambda: (
                    f"topic {name!r} not described as 3 partitions of 3 replicas: {replica_counts(kafka, name)}"
                ),
            )
            # the same holds for its configs: a broker that has not applied the topic answers with no entries
            # (kafka-python drops the error code), so ask until one describes the setting
            setting = wait_until(
                lambda: topic_config(kafka, name).get("min.insync.replicas"),
                timeout_s=30,
                transient=(KafkaError,),
                what=lambda: f"topic {name!r} has no min.insync.replicas: {topic_config(kafka, name)}",
            )
            assert (setting["value"], setting["config_source"]) == ("2", "DYNAMIC_TOPIC_CONFIG"), setting
            # a replication the cluster cannot give is refused with the options that change it
            four = KafkaCluster(cluster.bootstrap_servers, provider="external", replication_factor=4)
            with pytest.raises(
                TheodoliteSetupError, match=r"replication factor 4.*--kafka-replication-factor"
            ):
                four.create_gate_topic(four.gate_topic_name("r2", "input"), 1)
            four.close()
            kafka.delete_topic(name)
        finally:
            kafka.close()


#: brokers that drop a stopped follower from the ISR, and fence a killed leader, within seconds
QUICK_FAILOVER = {
    "replica.lag.time.max.ms": "2000",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}
#: one sub-experiment of about 20 s: 3 s warm-up, 10 s measured
LOSS_SETTINGS = ExperimentSettings(
    loads=(1000,),
    resources=(1,),
    duration_s=10,
    sample_interval_s=1,
    slo=SloSettings(warmup_s=3, lag_trend_threshold=SlopeThreshold(relative_to_load=0.2)),
)


def _admin(cluster: EmbeddedKafkaCluster, nodes: list[int]) -> KafkaAdminClient:
    """An admin client that knows only `nodes` (ids from 1): a stopped broker would hold each request it gets
    for the whole request timeout."""
    return KafkaAdminClient(
        bootstrap_servers=[cluster.brokers[node - 1].bootstrap_servers for node in nodes],
        request_timeout_ms=3000,
    )


def _partition(admin: KafkaAdminClient, topic: str) -> dict:
    [described] = admin.describe_topics([topic])
    [partition] = described["partitions"]
    return partition


def _lose_acknowledged_records(cluster: EmbeddedKafkaCluster, results: Path, log: list[str]) -> None:
    """Once the sub-experiment measures: its input partition's follower stopped (SIGSTOP) until the ISR is the
    leader alone, two seconds of writes acknowledged by the leader only, the leader SIGKILLed, the follower
    resumed and elected uncleanly -- as an operator restoring availability would (kafka-leader-election.sh
    --election-type unclean)."""
    wait_until(
        lambda: any(len(p.read_text().splitlines()) > 2 for p in results.glob("*_lag-trend_*.csv")),
        timeout_s=120,
        interval_s=0.2,
        what="a sub-experiment that samples",
    )
    admin = _admin(cluster, [1, 2, 3])
    [topic] = [t for t in admin.list_topics() if t.startswith("theodolite-") and t.endswith("-input")]
    partition = _partition(admin, topic)
    admin.close()
    leader = partition["leader_id"]
    [follower] = [node for node in partition["replica_nodes"] if node != leader]
    [bystander] = [node for node in (1, 2, 3) if node not in partition["replica_nodes"]]
    pid = {node: cluster.brokers[node - 1].process.pid for node in (leader, follower)}
    os.killpg(pid[follower], signal.SIGSTOP)
    try:
        alive = _admin(cluster, [leader, bystander])
        wait_until(
            lambda: _partition(alive, topic)["isr_nodes"] == [leader],
            timeout_s=30,
            transient=(KafkaError, OSError),
            what=f"the ISR of {topic} shrunk to its leader {leader}",
        )
        alive.close()
        time.sleep(2.0)  # written, and acknowledged by the leader alone
        os.killpg(pid[leader], signal.SIGKILL)
        log.append(f"leader {leader} killed; follower {follower} out of the ISR")
    finally:
        os.killpg(pid[follower], signal.SIGCONT)

    def elected() -> bool:
        # a new client each time: the killed leader may have been the active controller, which a client's
        # metadata goes on naming until it asks again
        survivors = _admin(cluster, [follower, bystander])
        try:
            survivors.elect_leaders(1, {topic: [0]})  # 1: unclean
            return _partition(survivors, topic)["leader_id"] == follower
        finally:
            survivors.close()

    wait_until(elected, timeout_s=60, transient=(KafkaError, OSError), what=f"{follower} elected uncleanly")
    log.append(f"follower {follower} elected uncleanly")


def test_acknowledged_records_lost_by_an_unclean_election_make_the_point_errored(spark_cluster, tmp_path):
    with EmbeddedKafkaCluster(3, work_dir=tmp_path / "kafka", server_properties=QUICK_FAILOVER) as cluster:
        kafka = KafkaCluster(
            cluster.bootstrap_servers, provider="external", replication_factor=2, min_insync_replicas=1
        )
        benchmark = Benchmark(
            "uc1-lossy", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=1
        )
        results = tmp_path / "results"
        writer = new_writer(results, "lossy", benchmark, LOSS_SETTINGS, Metric.DEMAND, testbed={"cores": 2})
        runner = ExperimentRunner(benchmark, LOSS_SETTINGS, kafka, spark_cluster, writer)
        log: list[str] = []
        errors: list[BaseException] = []

        def fault() -> None:
            try:
                _lose_acknowledged_records(cluster, results, log)
            except BaseException as exc:  # reported by the test, not lost in the thread
                errors.append(exc)

        thread = threading.Thread(target=fault, daemon=True)
        thread.start()
        record = runner.run_sub_experiment(1000, 1)
        thread.join(timeout=120)
        assert not errors and len(log) == 2, (errors, log)
        details = " ".join(v.detail for v in record.verdicts)
        print(f"{'; '.join(log)}: {record.outcome.value.upper()}: {details}")  # shown with -rP
        assert record.outcome is Outcome.ERRORED, record
        [repetition] = record.repetitions
        counters = repetition.counters
        assert counters["records_in_input_topic"] < counters["records_acknowledged"], counters
        lost = counters["records_acknowledged"] - counters["records_in_input_topic"]
        assert f"{lost} acknowledged records were lost" in details, details
        kafka.close()
