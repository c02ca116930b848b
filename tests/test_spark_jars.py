"""The Kafka connector is resolved for the Scala build of the installed pyspark (infra/spark/jars.py)."""

import pytest

from pytest_theodolite.infra.spark.jars import connector_coordinates, scala_binary


@pytest.mark.parametrize(
    ("jar", "scala"),
    [("scala-library-2.13.16.jar", "2.13"), ("scala-library-2.12.18.jar", "2.12"), (None, "2.13")],
    ids=["pyspark 4", "pyspark 3.5", "no scala-library: Spark 4's"],
)
def test_the_scala_build_is_read_from_pyspark_jars(tmp_path, jar, scala):
    (tmp_path / "spark-core_2.12-3.5.1.jar").touch()
    if jar:
        (tmp_path / jar).touch()
    assert scala_binary(tmp_path) == scala


def test_the_connector_matches_spark_and_scala():
    assert connector_coordinates("3.5.1", "2.12") == ["org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.1"]
    assert connector_coordinates("4.0.0") == ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"]
