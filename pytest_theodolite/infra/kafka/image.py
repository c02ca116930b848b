"""A Kafka image built on this machine, for ``--kafka testcontainers`` where no registry serves one.

Two images, each built once and cached by content (its tag carries a hash of its recipe):

- a base: a Debian root filesystem made by ``debootstrap`` (minbase plus a Java 17 runtime) from the Debian
  mirror apt uses here, imported ``FROM scratch``;
- the broker: that base plus the Apache Kafka jars Maven resolves (the embedded broker's, same version) and a
  start script that configures KRaft from ``KAFKA_*`` environment variables the way the apache/kafka and
  confluentinc/cp-kafka images do, so the provider drives all three alike.

The mirror is where the packages come from, not what they are, so it is not part of the hash.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra import maven
from pytest_theodolite.infra.kafka.embedded import LOG4J2_PROPERTIES, SINGLE_NODE_SETTINGS, broker_coordinates
from pytest_theodolite.infra.kafka.version import KAFKA_VERSION

DEBIAN_SUITE = "bookworm"
DEBIAN_PACKAGES = ("openjdk-17-jre-headless",)
BASE_REPOSITORY = "pytest-theodolite/debian-java"
KAFKA_REPOSITORY = "pytest-theodolite/kafka"
BUILD_LOCK_TIMEOUT_S = 1800.0
DEBOOTSTRAP_TIMEOUT_S = 1200.0

#: Turns KAFKA_FOO_BAR=v into foo.bar=v ('__' -> '_', '___' -> '-'), as the apache/kafka image documents;
#: the JVM options that share the prefix are not broker settings.
START_SCRIPT = """\
#!/bin/sh
set -eu
props=/var/lib/kafka/server.properties
mkdir -p /var/lib/kafka
: > "$props"
env | grep '^KAFKA_' | while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS|KAFKA_JMX_OPTS) continue ;;
  esac
  key=$(printf '%s' "${name#KAFKA_}" | tr 'A-Z' 'a-z' \\
        | sed -e 's/___/-/g' -e 's/__/@UNDERSCORE@/g' -e 's/_/./g' -e 's/@UNDERSCORE@/_/g')
  printf '%s=%s\\n' "$key" "$value" >> "$props"
done
java -cp '/opt/kafka/libs/*' -Dlog4j2.configurationFile=/opt/kafka/log4j2.properties \\
  kafka.tools.StorageTool format --ignore-formatted -t "$CLUSTER_ID" -c "$props"
exec java ${KAFKA_HEAP_OPTS:-} ${KAFKA_OPTS:-} -XX:+UseG1GC -Djava.awt.headless=true \\
  -Dlog4j2.configurationFile=/opt/kafka/log4j2.properties -cp '/opt/kafka/libs/*' kafka.Kafka "$props"
"""


def environment_variable(setting: str) -> str:
    """The variable the start script reads a broker setting from: ``log.dirs`` -> ``KAFKA_LOG_DIRS``."""
    return "KAFKA_" + setting.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def broker_environment(settings: dict[str, str]) -> dict[str, str]:
    return {environment_variable(key): value for key, value in settings.items()}


#: what the image runs with no environment given: one KRaft node, broker and controller in one JVM
IMAGE_ENVIRONMENT = {
    "CLUSTER_ID": "4L6g3nShT-eMCtK--X86sw",
    "KAFKA_HEAP_OPTS": "-Xmx1g -Xms256m",
    **broker_environment(
        {
            "node.id": "1",
            "process.roles": "broker,controller",
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "advertised.listeners": "PLAINTEXT://localhost:9092",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": "1@localhost:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": "/var/lib/kafka/data",
            **SINGLE_NODE_SETTINGS,
        }
    ),
}


def base_dockerfile() -> str:
    return 'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/sh"]\n'


def kafka_dockerfile(base_tag: str) -> str:
    env = "".join(f'ENV {name}="{value}"\n' for name, value in IMAGE_ENVIRONMENT.items())
    return (
        f"FROM {base_tag}\n"
        "COPY libs/ /opt/kafka/libs/\n"
        "COPY start-kafka.sh log4j2.properties /opt/kafka/\n"
        f"{env}"
        "EXPOSE 9092\n"
        'CMD ["/bin/sh", "/opt/kafka/start-kafka.sh"]\n'
    )


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def base_tag() -> str:
    recipe = _digest(DEBIAN_SUITE, "minbase", *DEBIAN_PACKAGES, base_dockerfile())
    return f"{BASE_REPOSITORY}:{DEBIAN_SUITE}-{recipe}"


def kafka_tag(kafka_version: str = KAFKA_VERSION) -> str:
    # The jars are named by their coordinates (Maven artifacts of a release never change).
    recipe = _digest(
        base_tag(),
        *broker_coordinates(kafka_version),
        kafka_dockerfile(base_tag()),
        START_SCRIPT,
        LOG4J2_PROPERTIES,
    )
    return f"{KAFKA_REPOSITORY}:{kafka_version}-{recipe}"


def debian_mirror(environ: dict[str, str] | None = None, apt_dir: Path = Path("/etc/apt")) -> str:
    """``$THEODOLITE_DEBIAN_MIRROR``, else the first Debian archive apt is configured with here."""
    environ = dict(os.environ) if environ is None else environ
    if environ.get("THEODOLITE_DEBIAN_MIRROR"):
        return environ["THEODOLITE_DEBIAN_MIRROR"]
    sources = [*sorted(apt_dir.glob("sources.list.d/*.sources")), apt_dir / "sources.list"]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        uris = re.findall(r"^URIs:\s*(\S+)", text, re.MULTILINE)
        uris += re.findall(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", text, re.MULTILINE)
        for uri in uris:
            if "security" not in uri:
                return uri
    raise TheodoliteSetupError(
        "Building the Kafka image needs a Debian mirror, and apt names none here (/etc/apt/sources.list*). "
        "Set THEODOLITE_DEBIAN_MIRROR to one, or name an image with --kafka-image."
    )


@dataclass(frozen=True)
class ImageBuild:
    """What ``ensure_kafka_image`` did: the tag, and the seconds each part took (0 where it was cached)."""

    tag: str
    base_seconds: float
    kafka_seconds: float

    @property
    def cached(self) -> bool:
        return self.base_seconds == 0 and self.kafka_seconds == 0


def ensure_kafka_image(
    client: Any,
    cache_dir: Path | None = None,
    kafka_version: str = KAFKA_VERSION,
    progress: Callable[[str], None] = lambda message: None,
) -> ImageBuild:
    """Build the base and the broker image unless an image of the same recipe is there; return the tag.

    ``client`` is a ``docker.DockerClient``. A file lock in the cache keeps parallel sessions (xdist workers,
    two pytest runs) from building the same image twice."""
    cache_dir = Path(cache_dir or maven.default_cache_dir())
    cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir / "kafka-image.lock"), timeout=BUILD_LOCK_TIMEOUT_S):
        base_seconds = 0.0
        if not _has_image(client, base_tag()):
            progress(f"building {base_tag()} (debootstrap {DEBIAN_SUITE} + {', '.join(DEBIAN_PACKAGES)}) ...")
            started = time.monotonic()
            _build_base(client)
            base_seconds = time.monotonic() - started
        kafka_seconds = 0.0
        tag = kafka_tag(kafka_version)
        if not _has_image(client, tag):
            progress(f"building {tag} ...")
            started = time.monotonic()
            jars = maven.resolve(broker_coordinates(kafka_version), cache_dir)
            _build_kafka(client, tag, jars)
            kafka_seconds = time.monotonic() - started
    return ImageBuild(tag, base_seconds, kafka_seconds)


def _has_image(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _build_base(client: Any) -> None:
    if shutil.which("debootstrap") is None:
        raise TheodoliteSetupError(
            "Building the Kafka image needs debootstrap, which is not installed (apt-get install debootstrap), "
            "or name an image a registry serves with --kafka-image."
        )
    if os.geteuid() != 0:
        raise TheodoliteSetupError(
            "Building the Kafka image runs debootstrap, which needs root; run once as root to build "
            f"{base_tag()}, or name an image with --kafka-image."
        )
    with tempfile.TemporaryDirectory(prefix="theodolite-image-") as tmp:
        context = Path(tmp)
        rootfs = context / "rootfs"
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(DEBIAN_PACKAGES)}",
            DEBIAN_SUITE,
            str(rootfs),
            debian_mirror(),
        ]
        _run(command, "debootstrap", DEBOOTSTRAP_TIMEOUT_S)
        # what a container never needs: package caches, documentation
        for unneeded in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man"):
            shutil.rmtree(rootfs / unneeded, ignore_errors=True)
        _run(
            ["tar", "-C", str(rootfs), "-cf", str(context / "rootfs.tar"), "."],
            "packing the root filesystem",
            600,
        )
        shutil.rmtree(rootfs, ignore_errors=True)
        (context / "Dockerfile").write_text(base_dockerfile())
        _docker_build(client, context, base_tag())


def _build_kafka(client: Any, tag: str, jars: Sequence[Path]) -> None:
    with tempfile.TemporaryDirectory(prefix="theodolite-image-") as tmp:
        context = Path(tmp)
        (context / "libs").mkdir()
        for jar in jars:
            shutil.copy2(jar, context / "libs" / jar.name)
        (context / "start-kafka.sh").write_text(START_SCRIPT)
        (context / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        (context / "Dockerfile").write_text(kafka_dockerfile(base_tag()))
        _docker_build(client, context, tag)


def _docker_build(client: Any, context: Path, tag: str) -> None:
    import docker.errors

    try:
        # pull=False: the base is local (or scratch); there is no registry to ask
        client.images.build(path=str(context), tag=tag, rm=True, forcerm=True, pull=False)
    except docker.errors.BuildError as exc:
        lines = [str(item.get("stream", item.get("error", ""))).strip() for item in exc.build_log]
        tail = "\n".join(line for line in lines if line)[-1500:]
        raise TheodoliteSetupError(f"Building the image {tag} failed: {exc.msg}\n{tail}") from exc
    except docker.errors.APIError as exc:
        raise TheodoliteSetupError(f"Building the image {tag} failed: {exc.explanation or exc}") from exc


def _run(command: list[str], what: str, timeout_s: float) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise TheodoliteSetupError(
            f"Building the Kafka image: {what} did not finish within {timeout_s:.0f} s."
        ) from exc
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip()[-1500:]
        raise TheodoliteSetupError(
            f"Building the Kafka image: {what} failed (exit code {proc.returncode}):\n{output}\n"
            "Name an image a registry serves with --kafka-image to skip the build."
        )
