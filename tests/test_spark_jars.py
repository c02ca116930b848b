"""The Kafka connector is resolved for the Scala build of the installed pyspark (infra/spark/jars.py)."""

from pathlib import Path

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


def test_a_release_maven_cannot_resolve_falls_back_to_the_nearest_of_its_minor_line_and_says_so():
    from pytest_theodolite.core.errors import TheodoliteSetupError
    from pytest_theodolite.infra.spark.jars import (
        ConnectorVersionWarning,
        connector_jars,
        kafka_connector,
        nearest_releases,
    )

    assert nearest_releases("4.2.1") == ["4.2.1", "4.2.0"]
    assert nearest_releases("4.1.0.dev1") == ["4.1.0.dev1"]
    asked = []

    def maven_serving_up_to_4_2_0(coordinates, cache_dir):
        asked.append(coordinates[0].rsplit(":", 1)[1])
        if asked[-1] != "4.2.0":
            raise TheodoliteSetupError(f"Maven could not resolve {coordinates[0]}")
        return [Path("/cache/spark-sql-kafka-0-10_2.13-4.2.0.jar"), Path("/cache/slf4j-api-2.0.16.jar")]

    with pytest.warns(
        ConnectorVersionWarning, match=r"connector 4\.2\.0 runs with pyspark 4\.2\.3.*pyspark==4\.2\.0"
    ):
        jars = connector_jars(spark_version="4.2.3", resolve=maven_serving_up_to_4_2_0)
    assert asked == ["4.2.3", "4.2.2", "4.2.1", "4.2.0"]  # the nearest first
    assert [jar.name for jar in jars] == [
        "spark-sql-kafka-0-10_2.13-4.2.0.jar"
    ]  # slf4j-api: pyspark ships it

    with pytest.warns(ConnectorVersionWarning):
        connector = kafka_connector(spark_version="4.2.3", resolve=maven_serving_up_to_4_2_0)
    assert (connector.version, connector.pyspark_version, connector.exact) == ("4.2.0", "4.2.3", False)
    exact = kafka_connector(spark_version="4.2.0", resolve=maven_serving_up_to_4_2_0)
    assert exact.exact and exact.version == "4.2.0"

    def maven_serving_nothing(coordinates, cache_dir):
        raise TheodoliteSetupError(f"Maven could not resolve {coordinates[0]}")

    with pytest.raises(TheodoliteSetupError, match=r"could not resolve .*:4\.2\.3$"):  # the exact release's
        connector_jars(spark_version="4.2.3", resolve=maven_serving_nothing)


def test_a_fallback_connector_is_a_fact_of_the_testbed_every_result_and_baseline_records(tmp_path: Path):
    """Recorded beside the numbers, and named beside a verdict against a baseline of the exact release."""
    from pytest_theodolite.engine.settings import TheodoliteSettings
    from pytest_theodolite.engine.testbed import testbed
    from pytest_theodolite.infra.spark.cluster import SparkCluster

    def cluster(fallback):
        return SparkCluster("spark://x:7077", 2, [], connector_fallback=fallback)

    settings = TheodoliteSettings(cache_dir=tmp_path)
    fell_back = testbed(settings, cluster("4.2.0"), None, extra={"runner": "ci"})
    assert fell_back.extra == {"runner": "ci", "kafka_connector": "4.2.0"}
    assert fell_back.to_dict()["extra"]["kafka_connector"] == "4.2.0"
    exact = testbed(settings, cluster(None), None, extra={"runner": "ci"})
    assert "kafka_connector" not in exact.extra
    [difference] = exact.differences(fell_back)
    assert (difference.baseline, difference.measured) == ("kafka_connector unset", "kafka_connector 4.2.0")


def cache_connector(cache_dir: Path, version: str) -> None:
    """A connector release in the jar cache as an earlier run's `maven.resolve` leaves it."""
    from pytest_theodolite.infra import maven
    from pytest_theodolite.infra.spark.jars import connector_coordinates, pyspark_home

    entry = maven._cache_entry(
        connector_coordinates(version, scala_binary(pyspark_home() / "jars")), cache_dir
    )
    (entry / "lib").mkdir(parents=True)
    (entry / "lib" / f"spark-sql-kafka-0-10-{version}.jar").write_bytes(b"")
    (entry / ".complete").write_text("")


def test_the_connector_a_run_before_resolved_is_read_from_the_jar_cache_without_maven(tmp_path: Path):
    from pytest_theodolite.infra.spark.jars import cached_connector_version

    assert cached_connector_version(tmp_path, "4.2.3") is None
    cache_connector(tmp_path, "4.2.0")
    assert cached_connector_version(tmp_path, "4.2.3") == "4.2.0"  # the nearest earlier one
    cache_connector(tmp_path, "4.2.3")
    assert cached_connector_version(tmp_path, "4.2.3") == "4.2.3"  # the exact one first
    assert cached_connector_version(tmp_path, "4.1.0") is None  # another minor line is no fallback


def test_the_header_names_a_connector_of_another_release_than_pyspark(pytester, monkeypatch, tmp_path: Path):
    from pytest_theodolite.infra.spark import jars

    cache_connector(tmp_path, "4.0.0")
    monkeypatch.setenv("THEODOLITE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(jars, "pyspark_version", lambda: "4.0.2")
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "theodolite: kafka=*(pyspark 4.0.2 with the Kafka connector 4.0.0, the nearest release Maven resolved)*"
        ]
    )
    monkeypatch.setattr(jars, "pyspark_version", lambda: "4.0.0")
    exact = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    exact.stdout.fnmatch_lines(["theodolite: kafka=*(pyspark 4.0.0), max instances=*"])
