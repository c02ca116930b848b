"""A job of a shape the project's gates do not have, written as a user would: per-record work in a Python UDF.

Records: product reviews, ``{"product", "user", "text", "ts"}``, one user per key. A Python UDF scores each
review's text (tokens, a keyword weight, a salted digest ``DIGEST_ROUNDS`` times -- the knob an experiment turns
to make a record dearer), and the job sums the scores per product over 10-second event-time windows.

Kept in experiments/ and never gated by the project's own benchmarks: it judges pull-request mode on a job no
rule was fitted to.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DoubleType

from pytest_theodolite import EVENT_TIME, KEY, Benchmark, Choice, JsonTemplate, Workload

#: how many times each review's digest is hashed (an experiment's change raises it)
DIGEST_ROUNDS = 4

TEXTS = [
    "great value would buy again",
    "arrived late and the box was damaged",
    "works as described but the manual is useless",
    "terrible battery life returned it after a week",
    "my kids love it and so do I",
    "cheap plastic feels like it will break soon",
]
WEIGHTS = {"great": 2.0, "love": 2.0, "works": 1.0, "late": -1.0, "damaged": -2.0, "terrible": -3.0}
REVIEWS = JsonTemplate(
    {
        "product": Choice([f"p{i}" for i in range(40)]),
        "user": KEY,
        "text": Choice(TEXTS),
        "ts": EVENT_TIME,
    },
    key_format="reviewer-{key_index}",
)
REVIEW_SCHEMA = "product STRING, user STRING, text STRING, ts LONG"


def score(text: str | None, user: str | None) -> float:
    """The review's keyword weight, plus a small stable per-user jitter from a salted digest."""
    if not text:
        return 0.0
    weight = sum(WEIGHTS.get(token, 0.0) for token in text.lower().split())
    digest = (user or "").encode()
    for _ in range(DIGEST_ROUNDS):
        digest = hashlib.sha256(digest + b"salt").digest()
    return weight + digest[0] / 2560.0


def product_scores(raw: DataFrame) -> DataFrame:
    review = F.from_json(F.col("value").cast("string"), REVIEW_SCHEMA)
    parsed = raw.select(review.alias("r")).select("r.*").where(F.col("ts").isNotNull())
    scored = parsed.withColumn("score", F.udf(score, DoubleType())("text", "user")).withColumn(
        "event_time", F.timestamp_millis("ts")
    )
    windowed = (
        scored.withWatermark("event_time", "2 seconds")
        .groupBy(F.window("event_time", "10 seconds").alias("window"), "product")
        .agg(F.count(F.lit(1)).alias("reviews"), F.sum("score").alias("score"))
    )
    return windowed.select(
        F.col("product").alias("key"),
        F.to_json(F.struct("product", F.col("window.start").alias("start"), "reviews", "score")).alias(
            "value"
        ),
    )


def start_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    checkpoint_dir: str,
    kafka_options: dict[str, str] | None = None,
    max_offsets_per_trigger: int | None = None,
    **unused: Any,
) -> StreamingQuery:
    if unused:
        raise TypeError(f"unknown option(s) {sorted(unused)}")
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", input_topic)
        .option("startingOffsets", "latest")
        .options(**(kafka_options or {}))
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return (
        product_scores(reader.load())
        .writeStream.outputMode("append")
        .format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .options(**(kafka_options or {}))
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )


REVIEWS_USERS = Benchmark(
    "review-scores-users",
    start_query,
    lambda users: Workload(keys=users, records=REVIEWS),
    input_partitions=4,
)
