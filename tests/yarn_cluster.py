"""A YARN and HDFS mini cluster (Hadoop's own, tests/yarn/MiniYarn.java) as a child JVM, for the gate's tests on
`--spark-master yarn`: its jars resolved by Maven into the session's cache, the class compiled with the JDK's
javac, the clients' configuration written into a HADOOP_CONF_DIR. Stopped with its process group."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pytest_theodolite.infra import maven
from pytest_theodolite.infra.process import ManagedProcess
from pytest_theodolite.infra.spark.jars import pyspark_home
from pytest_theodolite.infra.waiting import poll_until

SOURCE = Path(__file__).parent / "yarn" / "MiniYarn.java"
#: what the mini clusters need beside hadoop-client-minicluster (which lists none of them): log4j 1's API, the
#: NameNode's crypto, the ResourceManager's web services' JAXB
EXTRA_COORDINATES = [
    "ch.qos.reload4j:reload4j:1.2.25",
    "org.bouncycastle:bcprov-jdk18on:1.79",
    "org.bouncycastle:bcpkix-jdk18on:1.79",
    "javax.xml.bind:jaxb-api:2.3.1",
    "org.glassfish.jaxb:jaxb-runtime:2.3.9",
]
#: Hadoop's injection framework reaches into the JDK's classes
JAVA_OPENS = [
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in (
        "java.lang",
        "java.lang.reflect",
        "java.util",
        "java.io",
        "java.net",
        "java.nio",
        "sun.nio.ch",
    )
]
START_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class MiniYarn:
    conf_dir: Path  # HADOOP_CONF_DIR
    fs: str  # hdfs://localhost:<port>
    hdfs_web: str  # the NameNode's web address (WebHDFS), host:port

    def containers(self) -> dict[str, int]:
        """The Spark containers YARN's NodeManagers run now, by their processes: ApplicationMasters
        (``ExecutorLauncher``, client mode's) and executors (``YarnCoarseGrainedExecutorBackend``)."""
        counts = {"application_masters": 0, "executors": 0}
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                argv = cmdline.read_bytes().split(b"\0")
            except OSError:
                continue  # gone meanwhile
            if b"org.apache.spark.deploy.yarn.ExecutorLauncher" in argv:
                counts["application_masters"] += 1
            elif b"org.apache.spark.executor.YarnCoarseGrainedExecutorBackend" in argv:
                counts["executors"] += 1
        return counts

    def listing(self, path: str) -> list[str]:
        """The names under an HDFS directory, by WebHDFS; [] where it does not exist."""
        url = f"http://{self.hdfs_web}/webhdfs/v1{path}?op=LISTSTATUS&user.name=root"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                statuses = json.load(r)["FileStatuses"]["FileStatus"]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        return [status["pathSuffix"] for status in statuses]


def hadoop_version() -> str:
    """The Hadoop release pyspark's own client jars are of (hadoop-client-api-3.4.1.jar -> 3.4.1)."""
    for jar in sorted((pyspark_home() / "jars").glob("hadoop-client-api-*.jar")):
        match = re.fullmatch(r"hadoop-client-api-([\d.]+)\.jar", jar.name)
        if match:
            return match.group(1)
    raise RuntimeError(f"pyspark at {pyspark_home()} ships no hadoop-client-api jar")


@contextmanager
def mini_yarn(work_dir: Path, cache_dir: Path | None = None, node_managers: int = 1) -> Iterator[MiniYarn]:
    """The mini cluster, started in `work_dir` and stopped on exit (with whatever it started)."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac was not found: the YARN tests need a JDK (17 or newer)")
    jars = maven.resolve(
        [f"org.apache.hadoop:hadoop-client-minicluster:{hadoop_version()}", *EXTRA_COORDINATES], cache_dir
    )
    classpath = ":".join(str(jar) for jar in jars)
    classes, conf_dir, base = work_dir / "classes", work_dir / "conf", work_dir / "base"
    for directory in (classes, conf_dir, base):
        directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [javac, "-cp", classpath, "-d", str(classes), str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = work_dir / "mini-yarn.log"
    argv = [maven.java_executable(), *JAVA_OPENS, "-cp", f"{classes}:{classpath}", "MiniYarn"]
    # the mini clusters keep their NodeManagers' directories under ./target: in `work_dir`, not the caller's
    with ManagedProcess([*argv, str(conf_dir), str(node_managers), str(base)], log, cwd=work_dir) as process:

        def exited() -> None:
            if not process.alive():
                raise RuntimeError(
                    f"the mini YARN cluster exited ({process.returncode()}):\n{process.log_excerpt()}"
                )

        ready, _ = poll_until(
            lambda: next((line for line in _lines(log) if line.startswith("READY ")), None),
            timeout_s=START_TIMEOUT_S,
            interval_s=0.5,
            check=exited,
        )
        if ready is None:
            raise RuntimeError(
                f"the mini YARN cluster did not start in {START_TIMEOUT_S:.0f} s:\n{process.log_excerpt()}"
            )
        fields = dict(part.split("=", 1) for part in ready.split()[1:])
        yield MiniYarn(conf_dir, fields["fs"], fields["hdfs_web"])


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []
