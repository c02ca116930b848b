"""The testcontainers provider: the image built here (or one the user names), the same ``kafka_cluster`` surface
as the embedded broker, one container for all xdist workers, and no container left after the session.

The tests that need a Docker engine skip, saying why, where none answers; `.ci/run` starts one."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.engine.settings import build
from pytest_theodolite.infra.kafka.containers import LABEL, container_environment, docker_engine_problem
from pytest_theodolite.infra.kafka.embedded import SINGLE_NODE_SETTINGS
from pytest_theodolite.infra.kafka.image import (
    START_SCRIPT,
    debian_mirror,
    environment_variable,
    kafka_tag,
)

PROBLEM = docker_engine_problem()
#: the image the Docker tests start: the one built here, unless a registry serves another to test with
TEST_IMAGE = os.environ.get("THEODOLITE_TEST_KAFKA_IMAGE")
IMAGE_OPTION = [f"--kafka-image={TEST_IMAGE}"] if TEST_IMAGE else []
needs_docker = pytest.mark.skipif(
    PROBLEM is not None,
    reason=f"no Docker engine answers here ({PROBLEM}): the provider cannot start a container",
)


def test_the_image_is_configurable_and_built_here_by_default():
    assert build(lambda flag: None, [], environ={}).kafka_image is None
    chosen = build(lambda flag: "apache/kafka:4.1.1" if flag == "--kafka-image" else None, [], environ={})
    assert chosen.kafka_image == "apache/kafka:4.1.1"


def test_broker_settings_become_the_environment_variables_kafka_images_read():
    assert environment_variable("log.dirs") == "KAFKA_LOG_DIRS"
    assert environment_variable("a_b.c-d") == "KAFKA_A__B_C___D"
    env = container_environment(45678)
    assert env["KAFKA_ADVERTISED_LISTENERS"].startswith("PLAINTEXT://127.0.0.1:45678,")
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "BROKER"  # not the advertised host port
    assert "172." not in json.dumps(env)


def test_the_start_script_turns_the_environment_back_into_the_same_broker_settings(tmp_path):
    """The image's start script, run here by /bin/sh up to where it would start Java."""
    settings = {"listeners": "PLAINTEXT://:9092", "a_b.c-d": "x=y", **SINGLE_NODE_SETTINGS}
    script = START_SCRIPT.split("java -cp")[0].replace("/var/lib/kafka", str(tmp_path))
    env = {"PATH": os.environ["PATH"], "KAFKA_HEAP_OPTS": "-Xmx1g"}
    env |= {environment_variable(key): value for key, value in settings.items()}
    subprocess.run(["/bin/sh", "-c", script], env=env, check=True)
    lines = (tmp_path / "server.properties").read_text().splitlines()
    written = dict(line.split("=", 1) for line in lines)
    assert written == settings  # every setting, its value intact (an '=' in it too), and no JVM option


def test_the_debian_mirror_is_read_from_apt_or_the_environment(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
    )
    assert debian_mirror({}, tmp_path) == "http://mirror.example/debian"
    assert (
        debian_mirror({"THEODOLITE_DEBIAN_MIRROR": "http://other/debian"}, tmp_path) == "http://other/debian"
    )
    (tmp_path / "sources.list.d" / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://one-line.example/debian bookworm main\n")
    assert debian_mirror({}, tmp_path) == "http://one-line.example/debian"
    (tmp_path / "sources.list").unlink()
    with pytest.raises(TheodoliteSetupError, match="THEODOLITE_DEBIAN_MIRROR"):
        debian_mirror({}, tmp_path)


def test_the_image_tag_names_the_kafka_version_and_changes_with_the_recipe(monkeypatch):
    tag = kafka_tag("4.1.1")
    assert tag.startswith("pytest-theodolite/kafka:4.1.1-")
    assert kafka_tag("4.1.0") != tag.replace("4.1.1", "4.1.0")  # the jars are part of the recipe
    monkeypatch.setattr("pytest_theodolite.infra.kafka.image.START_SCRIPT", START_SCRIPT + "# changed\n")
    assert kafka_tag("4.1.1") != tag


def test_without_the_docker_extra_the_provider_says_which_command_installs_it(monkeypatch):
    from pytest_theodolite.infra.kafka.containers import start_kafka_container

    monkeypatch.setitem(sys.modules, "testcontainers.core.container", None)  # as if not installed
    with pytest.raises(TheodoliteSetupError) as refused:
        start_kafka_container(None)
    assert str(refused.value) == (
        "--kafka testcontainers needs the testcontainers.core.container package, which is not installed: "
        "pip install 'pytest-theodolite[docker]'"
    )


def test_no_docker_engine_is_one_clear_line(pytester, monkeypatch):
    pytester.makepyfile(
        "def test_needs_kafka(kafka_cluster):\n    pass\n\ndef test_not_reached():\n    pass\n"
    )
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent-theodolite.sock")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafka=testcontainers")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "theodolite: kafka=testcontainers (pytest-theodolite/kafka:4.1.1-*), *",
            "*pytest-theodolite: --kafka testcontainers needs a Docker engine, and none answers here (*). "
            "Start one (e.g. `dockerd &`), or use `--kafka embedded` to run a Kafka broker without Docker.",
            "*Interrupted: pytest-theodolite: --kafka testcontainers needs a Docker engine*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


# -- with a Docker engine -------------------------------------------------------------------------------------


def _our_containers() -> list[str]:
    import docker

    client = docker.from_env()
    try:
        return [c.short_id for c in client.containers.list(all=True, filters={"label": LABEL})]
    finally:
        client.close()


def _wait_no_containers(timeout_s: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := _our_containers()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@pytest.mark.integration
@needs_docker
def test_100k_records_round_trip_through_the_container_and_it_is_gone_after(pytester):
    # the embedded broker's own tests, run unchanged against the container
    pytester.makepyfile(test_broker=(Path(__file__).with_name("test_kafka_broker.py")).read_text())
    pytester.makepyfile(
        test_provider="""
        def test_provider(kafka_cluster):
            assert kafka_cluster.provider == "testcontainers"
            assert kafka_cluster.bootstrap_servers.startswith("127.0.0.1:")
        """
    )
    assert _our_containers() == [], "a container of an earlier run is still there"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kafka=testcontainers", *IMAGE_OPTION)
    result.assert_outcomes(passed=3, skipped=1)  # skipped: the embedded broker's own server.properties
    assert _wait_no_containers() == []


@pytest.mark.integration
@needs_docker
def test_a_missing_image_is_one_clear_line(pytester):
    pytester.makepyfile("def test_needs_kafka(kafka_cluster):\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--kafka=testcontainers", "--kafka-image=pytest-theodolite/no-such-kafka:0"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*The Kafka image pytest-theodolite/no-such-kafka:0 is not here and cannot be*"]
    )
    assert _wait_no_containers() == []


@pytest.mark.integration
@needs_docker
def test_ctrl_c_while_the_container_starts_removes_it(monkeypatch):
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    from pytest_theodolite.infra.kafka.containers import start_kafka_container

    def interrupted(self, container):
        raise KeyboardInterrupt  # as if Ctrl-C came while waiting for the broker's ready line

    monkeypatch.setattr(LogMessageWaitStrategy, "wait_until_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        start_kafka_container(TEST_IMAGE, progress=lambda message: None)
    assert _wait_no_containers() == []


@pytest.mark.integration
@needs_docker
def test_an_image_that_cannot_be_built_is_one_clear_error(monkeypatch, tmp_path):
    import docker

    from pytest_theodolite.infra.kafka import image

    # a recipe no image has yet (so it is built), from a mirror that does not answer (so the build fails)
    monkeypatch.setattr(image, "DEBIAN_PACKAGES", (*image.DEBIAN_PACKAGES, "theodolite-no-such-package"))
    monkeypatch.setenv("THEODOLITE_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")
    client = docker.from_env()
    try:
        with pytest.raises(TheodoliteSetupError) as failure:
            image.ensure_kafka_image(client, tmp_path)
    finally:
        client.close()
    first_line = str(failure.value).splitlines()[0]
    assert first_line.startswith("Building the Kafka image"), first_line
    assert "--kafka-image" in str(failure.value)  # says how to go on without a build


@pytest.mark.integration
@needs_docker
def test_xdist_workers_share_one_container_removed_once(pytester):
    for name in ("a", "b"):
        pytester.makepyfile(
            **{
                f"test_{name}": f"""
            import time

            def test_{name}(kafka_cluster, tmp_path_factory):
                kafka_cluster.create_topic("topic-{name}", partitions=1)
                out = tmp_path_factory.getbasetemp().parent.parent / "bootstrap-{name}"
                out.write_text(kafka_cluster.bootstrap_servers)
                time.sleep(3)  # both workers hold the broker at once
            """
            }
        )
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "no:cacheprovider", "--kafka=testcontainers", *IMAGE_OPTION
    )
    result.assert_outcomes(passed=2)
    written = sorted(Path(pytester.path).parent.rglob("bootstrap-[ab]"))
    assert len(written) == 2, written
    assert len({path.read_text() for path in written}) == 1, "each worker got its own broker"
    assert _wait_no_containers() == []


@pytest.mark.integration
@needs_docker
def test_ctrl_c_removes_the_container(pytester):
    pytester.makepyfile(
        """
        import pathlib, time

        def test_waits_for_ctrl_c(kafka_cluster):
            pathlib.Path("broker-up").write_text(kafka_cluster.bootstrap_servers)
            time.sleep(120)
        """
    )
    # the default SIGINT disposition, as a terminal's Ctrl-C finds it (a background job's would ignore it)
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--kafka=testcontainers", *IMAGE_OPTION],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    marker = pytester.path / "broker-up"
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and time.monotonic() < deadline and inner.poll() is None:
            time.sleep(0.2)
        assert marker.exists(), (
            inner.communicate(timeout=30)[0].decode() if inner.poll() is not None else "no broker"
        )
        assert len(_our_containers()) == 1
        inner.send_signal(signal.SIGINT)
        output = inner.communicate(timeout=60)[0].decode()
    finally:
        if inner.poll() is None:
            inner.kill()
    assert "KeyboardInterrupt" in output
    assert _wait_no_containers() == []


GATE = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite.engine.runner import Benchmark
from theodolite_spark_jobs import uc1

UC1 = Benchmark("uc1-container", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)

@pytest.mark.theodolite(UC1, loads=[300], resources=[1], duration=8, max_duration=30, max_warmup=40)
def test_uc1(theodolite_gate):
    theodolite_gate.check()
"""


@pytest.mark.integration
@pytest.mark.theodolite_exclusive  # it measures: under pytest-xdist nothing else may run beside it
@needs_docker
def test_a_gate_sub_experiment_runs_on_the_containerised_broker(pytester):
    """Which verdict it reaches depends on the host; that it reaches and records one on this provider does not."""
    pytester.makepyfile(test_gate=GATE)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--kafka=testcontainers",
        *IMAGE_OPTION,
        "--theodolite-results=results",
        "--theodolite-max-instances=1",
        "--theodolite-update-baselines",
    )
    result.assert_outcomes(passed=1)
    document = json.loads((pytester.path / "results" / "expuc1-container_results.json").read_text())
    assert document["settings"]["testbed"]["kafka_provider"] == "testcontainers"
    [sub] = document["sub_experiments"]
    assert sub["outcome"] in ("pass", "fail"), sub
    assert sorted((pytester.path / "results").glob("expuc1-container_300_1_lag-trend_0.csv"))
    assert json.loads((pytester.path / "baselines" / "uc1-container.json").read_text())["demand"].keys() == {
        "300"
    }
    assert _wait_no_containers() == []
