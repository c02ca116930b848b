"""UC1 database storage: read each record, convert it to the storage format, write it out.

Theodolite's UC1 stands for "store every record in a database" without benchmarking a database: the work is
the conversion. Here a record becomes a JSON document with the names and types a time-series store would
want (ISO-8601 time), written to ``output_topic`` -- or to nowhere with ``sink="noop"``.

Output: key = identifier, value = ``{"sensorId": "s_0", "time": "2024-01-01T00:00:00.000Z",
"epochMillis": 1704067200000, "activePowerW": 12.5}``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from .common import (
    DeploymentOptions,
    parse_power_records,
    read_kafka,
    start_sink,
    with_extra_hashes,
)

# ISO-8601 with the offset printed by Spark (UTC when the session time zone is UTC): an unambiguous instant
ISO_8601 = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"


def to_storage_format(records: DataFrame) -> DataFrame:
    """Parsed records -> ``key``/``value`` strings in the storage format (stateless, native)."""
    document = F.struct(
        F.col("identifier").alias("sensorId"),
        F.date_format("event_time", ISO_8601).alias("time"),
        F.col("timestamp").alias("epochMillis"),
        F.col("valueInW").alias("activePowerW"),
    )
    return records.select(F.col("identifier").alias("key"), F.to_json(document).alias("value"))


def start_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    checkpoint_dir: str,
    extra_hash_rounds: int = 0,
    **options: Any,
) -> StreamingQuery:
    """Start UC1 and return the running query. ``options``: the deployment options of
    :class:`spark_jobs.common.DeploymentOptions` (UC1 keeps no state, so ``watermark_delay`` and
    ``state_store`` have no effect).

    ``extra_hash_rounds``: make every record dearer by that many chained SHA-256 hashes of its value, with the
    same output -- a regression to inject without a code edit (common.with_extra_hashes)."""
    deployment = DeploymentOptions.from_options(options)
    raw = read_kafka(spark, bootstrap_servers=bootstrap_servers, topics=input_topic, deployment=deployment)
    records = with_extra_hashes(parse_power_records(raw), extra_hash_rounds)
    return start_sink(
        to_storage_format(records),
        bootstrap_servers=bootstrap_servers,
        output_topic=output_topic,
        checkpoint_dir=checkpoint_dir,
        output_mode="append",
        deployment=deployment,
    )
