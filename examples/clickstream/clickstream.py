"""A job that is not one of Theodolite's use cases, gated as one: page statistics of a click stream.

Records (the generator's JsonTemplate, one user per key): ``{"user", "page", "ms" (time on page), "price",
"ts" (event time, epoch ms)}``. The job counts, per page and tumbling event-time window, the clicks, the
distinct users (approximately) and the mean time on page, and writes one JSON record per page and window to
Kafka. The load dimension is the number of active users, each clicking once a second.

Plain PySpark: nothing here comes from pytest-theodolite except the job signature the runner calls
(``start_query(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir, **options)``) and the
observation ``records`` (records read, malformed), which lets the gate count what the job saw.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from pytest_theodolite import EVENT_TIME, KEY, Benchmark, Choice, IntRange, JsonTemplate, Uniform, Workload

PAGES = ["/", "/search", "/product", "/cart", "/checkout", "/account", "/help"]
CLICKS = JsonTemplate(
    {
        "user": KEY,
        "page": Choice(PAGES, [30, 25, 20, 10, 5, 5, 5]),
        "ms": IntRange(200, 60_000),
        "price": Uniform(1, 250),
        "ts": EVENT_TIME,
    },
    key_format="user-{key_index}",
)
CLICK_SCHEMA = "user STRING, page STRING, ms INT, price DOUBLE, ts LONG"


def page_statistics(raw: DataFrame, *, window_size: str, watermark_delay: str) -> DataFrame:
    """Kafka records -> one ``key`` (page) / ``value`` (JSON statistics) row per page and window."""
    click = F.from_json(F.col("value").cast("string"), CLICK_SCHEMA)
    parsed = raw.select(click.alias("click")).select("click.*")
    valid = F.col("user").isNotNull() & F.col("page").isNotNull() & F.col("ts").isNotNull()
    observed = parsed.withColumn("_valid", F.coalesce(valid, F.lit(False))).observe(
        "records",
        F.count(F.lit(1)).alias("total"),
        F.sum(F.when(F.col("_valid"), 0).otherwise(1)).alias("malformed"),
    )
    clicks = observed.where("_valid").withColumn("event_time", F.timestamp_millis("ts"))
    windowed = (
        clicks.withWatermark("event_time", watermark_delay)
        .groupBy(F.window("event_time", window_size).alias("window"), "page")
        .agg(
            F.count(F.lit(1)).alias("clicks"),
            F.approx_count_distinct("user").alias("users"),
            F.avg("ms").alias("meanMs"),
            F.sum("price").alias("revenue"),
        )
    )
    result = F.struct(
        "page",
        F.unix_millis(F.col("window.start")).alias("windowStart"),
        F.unix_millis(F.col("window.end")).alias("windowEnd"),
        "clicks",
        "users",
        "meanMs",
        "revenue",
    )
    return windowed.select(F.col("page").alias("key"), F.to_json(result).alias("value"))


def start_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    checkpoint_dir: str,
    window_size: str = "10 seconds",
    watermark_delay: str = "2 seconds",
    kafka_options: dict[str, str] | None = None,  # the cluster's client settings (SASL, TLS), from the runner
    max_offsets_per_trigger: int | None = None,  # a micro-batch cap, from the runner's capacity measurements
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
    raw = reader.load()
    statistics = page_statistics(raw, window_size=window_size, watermark_delay=watermark_delay)
    return (
        statistics.writeStream.outputMode("append")
        .format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .options(**(kafka_options or {}))
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )


#: the benchmark: this job along the number of active users, each clicking once a second
CLICKSTREAM_USERS = Benchmark(
    "clickstream-users",
    start_query,
    lambda users: Workload(keys=users, records=CLICKS),
    input_partitions=4,
)
