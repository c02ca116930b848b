"""UC3 aggregation by time attribute: re-key each reading by (sensor, hour of day in a chosen time zone), then
aggregate per key over sliding event-time windows with UC2's statistics.

Theodolite's workload: 30-day windows advancing by 1 day, i.e. "the average course over the day in the last
four weeks", every record contributing to 30 overlapping windows. Tests use windows of seconds.

Output: key = ``"<identifier>;<hourOfDay>"``, value = ``{"identifier", "hourOfDay", "timeZone",
"windowStart", "windowEnd" (epoch ms), "count", "sumInW", "minInW", "maxInW", "meanInW",
"populationVarianceInW"}``. ``output_mode="update"`` (default) writes the current statistics of every window a
micro-batch changed, as Theodolite's implementations emit periodically (with 30-day windows an append-mode
result would appear only 30 days after a window opened); ``"append"`` writes each window once, when the
watermark passes its end.

Give it a trigger interval (``trigger_interval="5 seconds"``, the emission period of Theodolite's Kafka Streams
UC3): where every key sends in every micro-batch, each batch updates, stores and writes all keys x windows
whatever its length, so with Spark's default trigger (the next batch at once) the CPU per record grows as
batches get shorter -- also when more executors make them shorter.
"""

from __future__ import annotations

from typing import Any, Literal

from pyspark.sql import Column, DataFrame, SparkSession
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

DEFAULT_WINDOW_SIZE = "30 days"
DEFAULT_WINDOW_ADVANCE = "1 day"
DEFAULT_TIME_ZONE = "UTC"
DEFAULT_WATERMARK_DELAY = "1 minute"


def hour_of_day(event_time: str, *, time_zone: str, session_time_zone: str) -> Column:
    """The hour (0-23) of the instant ``event_time`` on a wall clock in ``time_zone``.

    The instant becomes the session zone's wall-clock time (the cast), which ``convert_timezone`` moves to
    ``time_zone``; the result does not depend on the session zone, and daylight-saving shifts are honoured.
    """
    local_time = F.convert_timezone(
        F.lit(session_time_zone), F.lit(time_zone), F.col(event_time).cast("timestamp_ntz")
    )
    return F.hour(local_time)


def aggregate_by_hour_of_day(
    records: DataFrame,
    *,
    window_size: str,
    window_advance: str,
    time_zone: str,
    watermark_delay: str,
) -> DataFrame:
    """Parsed records -> one ``key``/``value`` row of statistics per (identifier, hour of day, sliding window)."""
    session_time_zone = records.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    keyed = records.withWatermark("event_time", watermark_delay).withColumn(
        "hourOfDay", hour_of_day("event_time", time_zone=time_zone, session_time_zone=session_time_zone)
    )
    windowed = keyed.groupBy(
        "identifier", "hourOfDay", F.window("event_time", window_size, window_advance).alias("window")
    ).agg(*power_statistics())
    result = F.struct(
        "identifier",
        "hourOfDay",
        F.lit(time_zone).alias("timeZone"),
        epoch_millis(F.col("window.start")).alias("windowStart"),
        epoch_millis(F.col("window.end")).alias("windowEnd"),
        *STATISTICS_FIELDS,
    )
    return windowed.select(
        F.concat_ws(";", "identifier", F.col("hourOfDay").cast("string")).alias("key"),
        F.to_json(result).alias("value"),
    )


def start_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    checkpoint_dir: str,
    window_size: str = DEFAULT_WINDOW_SIZE,
    window_advance: str = DEFAULT_WINDOW_ADVANCE,
    time_zone: str = DEFAULT_TIME_ZONE,
    output_mode: Literal["update", "append"] = "update",
    extra_hash_rounds: int = 0,
    **options: Any,
) -> StreamingQuery:
    """Start UC3 and return the running query.

    ``window_size`` / ``window_advance``: the sliding window as Spark intervals (``"30 days"`` / ``"1 day"``);
    ``time_zone``: IANA zone of the hour of day (``"UTC"``); ``output_mode``: ``"update"`` or ``"append"``
    (see the module docstring); ``extra_hash_rounds``: that many SHA-256 hashes more per record, the same
    output (common.with_extra_hashes: a regression to inject). ``options``: the deployment options of
    :class:`spark_jobs.common.DeploymentOptions` (``watermark_delay`` defaults to 1 minute).
    """
    if output_mode not in ("update", "append"):
        raise ValueError(f"output_mode must be 'update' or 'append', got {output_mode!r}")
    deployment = DeploymentOptions.from_options(options)
    raw = read_kafka(spark, bootstrap_servers=bootstrap_servers, topics=input_topic, deployment=deployment)
    results = aggregate_by_hour_of_day(
        with_extra_hashes(parse_power_records(raw), extra_hash_rounds),
        window_size=window_size,
        window_advance=window_advance,
        time_zone=time_zone,
        watermark_delay=deployment.watermark_delay or DEFAULT_WATERMARK_DELAY,
    )
    return start_sink(
        results,
        bootstrap_servers=bootstrap_servers,
        output_topic=output_topic,
        checkpoint_dir=checkpoint_dir,
        output_mode=output_mode,
        deployment=deployment,
    )
