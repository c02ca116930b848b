"""UC2 downsampling: per sensor, tumbling event-time windows with count, sum, min, max, mean and population
variance.

Output (append mode: one record per sensor and window, once the watermark has passed the window's end):
key = identifier, value = ``{"identifier", "windowStart", "windowEnd" (epoch ms, end exclusive), "count",
"sumInW", "minInW", "maxInW", "meanInW", "populationVarianceInW"}``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from .common import (
    STATISTICS_FIELDS,
    DeploymentOptions,
    epoch_millis,
    parse_power_records,
    power_statistics,
    read_kafka,
    start_sink,
    with_extra_hashes,
)

DEFAULT_WINDOW_SIZE = "1 minute"
#: how late a reading may arrive and still count; a window's result is written this long after its end
DEFAULT_WATERMARK_DELAY = "10 seconds"


def downsample(records: DataFrame, *, window_size: str, watermark_delay: str) -> DataFrame:
    """Parsed records -> one ``key``/``value`` row of statistics per identifier and tumbling window."""
    windowed = (
        records.withWatermark("event_time", watermark_delay)
        .groupBy("identifier", F.window("event_time", window_size).alias("window"))
        .agg(*power_statistics())
    )
    result = F.struct(
        "identifier",
        epoch_millis(F.col("window.start")).alias("windowStart"),
        epoch_millis(F.col("window.end")).alias("windowEnd"),
        *STATISTICS_FIELDS,
    )
    return windowed.select(F.col("identifier").alias("key"), F.to_json(result).alias("value"))


def start_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    checkpoint_dir: str,
    window_size: str = DEFAULT_WINDOW_SIZE,
    extra_hash_rounds: int = 0,
    **options: Any,
) -> StreamingQuery:
    """Start UC2 and return the running query.

    ``window_size``: tumbling window length as a Spark interval (``"1 minute"``); ``extra_hash_rounds``: that
    many SHA-256 hashes more per record, the same output (common.with_extra_hashes: a regression to inject).
    ``options``: the deployment options of :class:`spark_jobs.common.DeploymentOptions` (``watermark_delay``
    defaults to 10 seconds).
    """
    deployment = DeploymentOptions.from_options(options)
    raw = read_kafka(spark, bootstrap_servers=bootstrap_servers, topics=input_topic, deployment=deployment)
    results = downsample(
        with_extra_hashes(parse_power_records(raw), extra_hash_rounds),
        window_size=window_size,
        watermark_delay=deployment.watermark_delay or DEFAULT_WATERMARK_DELAY,
    )
    return start_sink(
        results,
        bootstrap_servers=bootstrap_servers,
        output_topic=output_topic,
        checkpoint_dir=checkpoint_dir,
        output_mode="append",
        deployment=deployment,
    )
