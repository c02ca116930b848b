"""A job package of a user's, not installed anywhere: its Python UDF lives in a module of its own, which the
executors import when they run it -- possible only where the package reaches them (shipped to a cluster's
executors, or on the path of those of a cluster started here)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = "clickjob"
JOB_MODULE = """
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from clickjob.scoring import score


def start_query(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir, **options):
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    scored = rows.select(
        F.col("key"), F.udf(score, LongType())(F.col("value")).cast("string").alias("value")
    )
    return (
        scored.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )
"""
JOB_SCORING = """
def score(value):
    return len(value or b"")
"""


def write_job_package(root: Path) -> Path:
    """The package ``clickjob`` (``clickjob.job.start_query``, its UDF in ``clickjob.scoring``) under `root`."""
    package = root / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "job.py").write_text(JOB_MODULE)
    (package / "scoring.py").write_text(JOB_SCORING)
    return package
