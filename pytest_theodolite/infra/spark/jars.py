"""The Kafka connector jars for the installed pyspark, resolved by Maven (not by Spark's Ivy).

The pyspark wheel ships Spark's own jars but no Kafka source/sink. The connector's runtime closure also lists
jars pyspark already has (scala-library, hadoop-client-*, slf4j, ...); those are dropped so that exactly one
copy of each library is on the classpath -- the one Spark was built with.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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


def connector_jars(cache_dir: Path | None = None, spark_version: str | None = None) -> list[Path]:
    version = spark_version or pyspark_version()
    jars_dir = pyspark_home() / "jars"
    resolved = maven.resolve(connector_coordinates(version, scala_binary(jars_dir)), cache_dir)
    shipped = {_artifact(j.name) for j in jars_dir.glob("*.jar")}
    return [jar for jar in resolved if _artifact(jar.name) not in shipped]
