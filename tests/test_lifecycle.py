"""Every process a test session starts, it stops: after success, under xdist, and on Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

pytestmark = pytest.mark.integration

RECORD_PROCESSES = """
import json, os, psutil

def record(name):
    # everything this pytest process started: broker, Spark master/workers/executors, the driver JVM
    procs = []
    for p in psutil.Process().children(recursive=True):
        try:
            procs.append({"pid": p.pid, "cmdline": " ".join(p.cmdline()), "create_time": p.create_time()})
        except psutil.Error:  # exited meanwhile (e.g. a finished spark-class launcher)
            pass
    with open(os.path.join(os.environ["RECORD_DIR"], name + ".json"), "w") as f:
        json.dump(procs, f)
"""


def _started(record_dir, *names):
    procs = []
    for name in names:
        procs += json.loads((record_dir / f"{name}.json").read_text())
    return procs


def _still_running(procs):
    alive = []
    for proc in procs:
        try:
            p = psutil.Process(proc["pid"])
            if p.create_time() == proc["create_time"] and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc["cmdline"][:160])
        except psutil.NoSuchProcess:
            pass
    return alive


def _wait_all_gone(procs, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while (alive := _still_running(procs)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def test_no_broker_master_worker_or_executor_survives_the_session(pytester, monkeypatch):
    monkeypatch.setenv("RECORD_DIR", str(pytester.path))
    pytester.makeconftest(RECORD_PROCESSES)
    pytester.makepyfile("""
        import os

        from conftest import record

        def test_uses_everything(kafka_cluster, spark_cluster):
            with spark_cluster.session(instances=2) as spark:
                assert spark.range(100).count() == 100
                record("during")
            with open(os.path.join(os.environ["RECORD_DIR"], "scratch"), "w") as f:
                f.write(str(spark_cluster.scratch_dir))
    """)
    # two workers: each starts as the others do, and the session asks for two instances
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--theodolite-max-instances=2")
    result.assert_outcomes(passed=1)
    procs = _started(pytester.path, "during")
    kinds = " ".join(p["cmdline"] for p in procs)
    for kind in (
        "kafka.Kafka",
        "deploy.master.Master",
        "deploy.worker.Worker",
        "CoarseGrainedExecutorBackend",
    ):
        assert kind in kinds, f"expected a {kind} process to have been started"
    assert _wait_all_gone(procs) == []
    # each executor's temporary files (lz4-java's native library, left there by a killed JVM) went to the
    # cluster's own directory, which is gone with it
    executors = [p["cmdline"] for p in procs if "CoarseGrainedExecutorBackend" in p["cmdline"]]
    temp_dirs = {
        arg.split("=", 1)[1] for cmdline in executors for arg in cmdline.split() if "java.io.tmpdir" in arg
    }
    assert len(temp_dirs) == 1, f"every executor needs the cluster's java.io.tmpdir, got {temp_dirs}"
    (temp_dir,) = temp_dirs
    assert (
        temp_dir.startswith(tempfile.gettempdir())
        and temp_dir.endswith("tmp")
        and not os.path.exists(temp_dir)
    )
    # and so did the jobs' checkpoints, where an executor still exiting may write after its run removed them
    scratch = (pytester.path / "scratch").read_text()
    assert os.path.dirname(scratch) == os.path.dirname(temp_dir) and not os.path.exists(scratch)


def test_xdist_workers_share_one_broker_that_is_stopped_once(pytester, monkeypatch):
    monkeypatch.setenv("RECORD_DIR", str(pytester.path))
    pytester.makeconftest(RECORD_PROCESSES)
    for worker_test in ("a", "b"):
        pytester.makepyfile(
            **{
                f"test_{worker_test}": f"""
            import os, time
            from conftest import record

            def test_{worker_test}(kafka_cluster, worker_id):
                kafka_cluster.create_topic("topic-{worker_test}", partitions=1)
                with open(os.path.join(os.environ["RECORD_DIR"], "bootstrap-{worker_test}"), "w") as f:
                    f.write(kafka_cluster.bootstrap_servers)
                record("during-{worker_test}")
                time.sleep(2)  # both workers hold the broker at once
        """
            }
        )
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    bootstraps = {(pytester.path / f"bootstrap-{t}").read_text() for t in ("a", "b")}
    assert len(bootstraps) == 1, f"each worker got its own broker: {bootstraps}"
    brokers = [p for p in _started(pytester.path, "during-a", "during-b") if "kafka.Kafka" in p["cmdline"]]
    assert len({p["pid"] for p in brokers}) == 1
    assert _wait_all_gone(brokers) == []


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_the_broker(pytester, tmp_path, stop_signal):
    """Ctrl-C, and SIGTERM (a cancelled CI job, ``timeout``), which the plugin turns into the same interrupt:
    whatever the session started is stopped (test_faults.py interrupts a whole gate, with Ctrl-C)."""
    pytester.makeconftest(RECORD_PROCESSES)
    pytester.makepyfile("""
        import time
        from conftest import record

        def test_waits_for_ctrl_c(kafka_cluster):
            record("before-interrupt")
            time.sleep(120)
    """)
    env = {**os.environ, "RECORD_DIR": str(pytester.path)}
    # a shell that starts a job in the background makes it ignore SIGINT, and Python then never installs its
    # KeyboardInterrupt handler: give the inner pytest the default disposition, as a terminal's Ctrl-C finds it
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(pytester.path)],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    record = pytester.path / "before-interrupt.json"
    deadline = time.monotonic() + 120
    while not record.exists() and time.monotonic() < deadline and inner.poll() is None:
        time.sleep(0.2)
    time.sleep(0.5)  # the file is complete once json.dump returned
    try:
        assert record.exists(), (
            inner.stdout.read().decode() if inner.poll() is not None else "no record in 120 s"
        )
        procs = _started(pytester.path, "before-interrupt")
        assert any("kafka.Kafka" in p["cmdline"] for p in procs)
        inner.send_signal(stop_signal)
        output = inner.communicate(timeout=60)[0].decode()
    finally:
        if inner.poll() is None:
            inner.kill()
    assert inner.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output
    assert _wait_all_gone(procs) == []
