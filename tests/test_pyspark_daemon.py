"""The executors' worker daemon's path pruning, as pure functions over a path and an environment."""

from pathlib import Path

import pyspark

from pytest_theodolite.infra.spark.pyspark_daemon import pyspark_is_spark_home, without_spark_archives


def test_only_the_archives_inside_spark_home_are_left_off(tmp_path):
    home = tmp_path / "pyspark"
    path = [
        str(tmp_path / "job"),
        str(home / "python" / "lib" / "pyspark.zip"),
        str(home / "python" / "lib" / "py4j-0.10.9.9-src.zip"),
        str(home / "jars" / "spark-core_2.13-4.0.0.jar"),
        str(tmp_path / "deps.zip"),  # the user's own archive stays
        str(home),  # a directory stays
    ]
    assert without_spark_archives(path, {"SPARK_HOME": str(home)}) == [path[0], path[4], path[5]]
    assert without_spark_archives(path, {}) == path  # no SPARK_HOME: nothing is known to be Spark's


def test_pyspark_is_spark_home_only_where_spark_home_is_the_installed_package(tmp_path):
    installed = str(Path(pyspark.__file__).parent)
    assert pyspark_is_spark_home({"SPARK_HOME": installed})
    assert not pyspark_is_spark_home({"SPARK_HOME": str(tmp_path)})  # a Spark distribution elsewhere
    assert not pyspark_is_spark_home({})
