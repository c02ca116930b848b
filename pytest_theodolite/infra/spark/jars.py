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

SCALA_BINARY = "2.13"


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def pyspark_home() -> Path:
    import pyspark

    return Path(os.path.dirname(pyspark.__file__))


def connector_coordinates(spark_version: str) -> list[str]:
    return [f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{spark_version}"]


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.0.jar`` -> ``kafka-clients``."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar_name)


def connector_jars(cache_dir: Path | None = None, spark_version: str | None = None) -> list[Path]:
    version = spark_version or pyspark_version()
    resolved = maven.resolve(connector_coordinates(version), cache_dir)
    shipped = {_artifact(j.name) for j in (pyspark_home() / "jars").glob("*.jar")}
    return [jar for jar in resolved if _artifact(jar.name) not in shipped]
