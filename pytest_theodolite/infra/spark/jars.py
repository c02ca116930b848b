"""The Kafka connector jars for the installed pyspark, resolved by Maven (not by Spark's Ivy).

The pyspark wheel ships Spark's own jars but no Kafka source/sink. The connector's runtime closure also lists
jars pyspark already has (scala-library, hadoop-client-*, slf4j, ...); those are dropped so that exactly one
copy of each library is on the classpath -- the one Spark was built with.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.infra import maven

#: Spark 4 is built for Scala 2.13 only; pyspark 3.x wheels ship Spark built for 2.12
DEFAULT_SCALA_BINARY = "2.13"


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def pyspark_home() -> Path:
    import pyspark

    return Path(os.path.dirname(pyspark.__file__))


def scala_binary(jars_dir: Path) -> str:
    """The Scala binary version pyspark's own jars were built for (``scala-library-2.12.18.jar`` -> 2.12): the
    connector must be the same build, or Spark fails at the first micro-batch with a NoSuchMethodError."""
    for jar in sorted(jars_dir.glob("scala-library-*.jar")):
        match = re.fullmatch(r"scala-library-(\d+\.\d+)\.[\w.\-]+\.jar", jar.name)
        if match:
            return match.group(1)
    return DEFAULT_SCALA_BINARY


def connector_coordinates(spark_version: str, scala: str = DEFAULT_SCALA_BINARY) -> list[str]:
    return [f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{spark_version}"]


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.0.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar_name)


def nearest_releases(spark_version: str) -> list[str]:
    """``4.2.1`` -> ``["4.2.1", "4.2.0"]``: the version itself, then the earlier releases of its minor line, the
    nearest first (a connector of the same minor runs on Spark's jars of that minor); a version that is not
    ``X.Y.Z`` is tried as it is."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", spark_version)
    if not match:
        return [spark_version]
    major, minor, patch = (int(part) for part in match.groups())
    return [f"{major}.{minor}.{p}" for p in range(patch, -1, -1)]


@dataclass(frozen=True)
class KafkaConnector:
    """The Kafka connector's jars, less those pyspark ships, and the release they are of."""

    jars: list[Path]
    version: str
    pyspark_version: str

    @property
    def exact(self) -> bool:
        return self.version == self.pyspark_version


def connector_jars(
    cache_dir: Path | None = None,
    spark_version: str | None = None,
    resolve: Callable[[list[str], Path | None], list[Path]] = maven.resolve,
) -> list[Path]:
    """The jars of :func:`kafka_connector`."""
    return kafka_connector(cache_dir, spark_version, resolve).jars


def kafka_connector(
    cache_dir: Path | None = None,
    spark_version: str | None = None,
    resolve: Callable[[list[str], Path | None], list[Path]] = maven.resolve,
) -> KafkaConnector:
    """The Kafka connector's jars for pyspark `spark_version` (the installed one by default), less those pyspark
    ships. Where Maven cannot resolve that exact release (a repository or mirror that does not serve it yet),
    the nearest earlier release of the same minor line that resolves, with a warning that names both and the
    way to match them; where none does, the error of the exact release."""
    version = spark_version or pyspark_version()
    jars_dir = pyspark_home() / "jars"
    scala = scala_binary(jars_dir)
    first_error: TheodoliteSetupError | None = None
    for candidate in nearest_releases(version):
        try:
            resolved = resolve(connector_coordinates(candidate, scala), cache_dir)
        except TheodoliteSetupError as exc:
            first_error = first_error or exc
            continue
        if candidate != version:
            warnings.warn(
                ConnectorVersionWarning(
                    f"the Kafka connector {candidate} runs with pyspark {version}: Maven could not resolve "
                    f"spark-sql-kafka-0-10_{scala}:{version}. To run the exact release, install "
                    f"`pyspark=={candidate}` or make {version} resolvable (your Maven mirror in "
                    "~/.m2/settings.xml)"
                ),
                stacklevel=2,
            )
        shipped = {_artifact(j.name) for j in jars_dir.glob("*.jar")}
        return KafkaConnector(
            [jar for jar in resolved if _artifact(jar.name) not in shipped], candidate, version
        )
    assert first_error is not None
    raise first_error


def cached_connector_version(cache_dir: Path | None = None, spark_version: str | None = None) -> str | None:
    """The connector release a run before this one resolved for pyspark `spark_version`, from the jar cache alone
    (no Maven): the exact release where it is cached, else the nearest cached one of the same minor line that
    `kafka_connector` would fall back to; None where none is cached (the run resolves it)."""
    version = spark_version or pyspark_version()
    scala = scala_binary(pyspark_home() / "jars")
    return next(
        (c for c in nearest_releases(version) if maven.is_cached(connector_coordinates(c, scala), cache_dir)),
        None,
    )


class ConnectorVersionWarning(UserWarning):
    """The Kafka connector is of another release of pyspark's minor line than the installed pyspark."""
