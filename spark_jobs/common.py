"""What the four use-case jobs share: the record schema, Kafka in and out, malformed-record accounting, the
summary statistics, and the deployment options (trigger, partitions, rate limit, state store, watermark).

Everything on the path of a record is a native Spark SQL expression (``from_json``, ``window``, aggregates,
``to_json``); nothing here starts a Python worker. This module imports neither pytest nor pytest_theodolite:
the jobs run on any Spark 4 cluster that has the ``spark-sql-kafka-0-10`` connector on its classpath.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

# -- the record ----------------------------------------------------------------------------------------------

#: The single definition of the input record (Theodolite's ``ActivePowerRecord``) as the generator writes it:
#: Kafka key = identifier (UTF-8), value = this JSON object, Kafka record timestamp = event time.
POWER_RECORD_SCHEMA = StructType(
    [
        StructField("identifier", StringType()),
        StructField("timestamp", LongType()),  # event time, epoch milliseconds
        StructField("valueInW", DoubleType()),
    ]
)

#: Columns of a parsed, valid record as :func:`parse_power_records` returns it.
PARSED_COLUMNS = (
    "identifier",
    "timestamp",
    "valueInW",
    "event_time",
    "kafka_timestamp",
    "topic",
    "partition",
    "offset",
)

#: Name of the observation that counts records (``query.lastProgress["observedMetrics"][RECORDS_METRIC]``).
RECORDS_METRIC = "records"
#: Name of the observation (field ``rows``) in which a job counts the input rows it dropped itself as later than
#: its watermark -- in an arbitrary stateful function, where Spark's ``numRowsDroppedByWatermark`` cannot see them
LATE_ROWS_METRIC = "late_rows"

# epoch ms outside [0, 9999-12-31] cannot become a Spark timestamp (ANSI mode would fail the whole query)
_MAX_EPOCH_MS = 253_402_300_799_999

StateStore = Literal["default", "rocksdb"]
SinkKind = Literal["kafka", "noop"]

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


# -- deployment options --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeploymentOptions:
    """How a job is run, as opposed to what it computes. Every job's ``start_query`` accepts these as keyword
    options next to its use-case parameters.

    - ``trigger_interval``: micro-batch interval such as ``"1 second"``; ``None`` = the next batch starts as soon
      as the previous one ends (Spark's default).
    - ``available_now``: process what the input holds at start, then stop (``Trigger.AvailableNow``; for tests
      and catch-up runs; overrides ``trigger_interval``).
    - ``shuffle_partitions``: partitions of every shuffle and of the state store; ``None`` = the cluster's total
      executor cores (``defaultParallelism``) rather than Spark's 200, which only suits large clusters: every
      partition costs a task and a state-store commit per micro-batch.
    - ``max_offsets_per_trigger``: rate limit per micro-batch (``maxOffsetsPerTrigger``); ``None`` = unlimited.
    - ``state_store``: ``"default"`` (HDFS-backed, in the executor heap) or ``"rocksdb"`` (off-heap, with
      changelog checkpointing).
    - ``watermark_delay``: how late an event may arrive, e.g. ``"10 seconds"``; ``None`` = the job's default.
    - ``kafka_options``: extra Kafka client settings for source and sink, e.g. ``{"kafka.security.protocol":
      "SASL_SSL"}`` (the ``kafka.`` prefix is added where missing).
    - ``sink``: ``"kafka"`` (default) or ``"noop"`` (compute everything, write nothing -- isolates the job from
      the broker's write path).
    - ``starting_offsets``: where the input starts when the checkpoint is new (``"earliest"``).
    - ``query_name``: the streaming query's name (shown in the Spark UI and in progress reports).
    """

    trigger_interval: str | None = None
    available_now: bool = False
    shuffle_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    state_store: StateStore = "default"
    watermark_delay: str | None = None
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    sink: SinkKind = "kafka"
    starting_offsets: str = "earliest"
    query_name: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DeploymentOptions:
        """Build from ``start_query``'s remaining keyword options; unknown names are an error, not ignored, so
        that a misspelt option cannot silently fall back to a default."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown option(s) {unknown}; known deployment options: {sorted(known)}")
        deployment = cls(**options)
        if deployment.state_store not in ("default", "rocksdb"):
            raise ValueError(f"state_store must be 'default' or 'rocksdb', got {deployment.state_store!r}")
        if deployment.sink not in ("kafka", "noop"):
            raise ValueError(f"sink must be 'kafka' or 'noop', got {deployment.sink!r}")
        if deployment.shuffle_partitions is not None and deployment.shuffle_partitions < 1:
            raise ValueError(f"shuffle_partitions must be >= 1, got {deployment.shuffle_partitions}")
        return deployment

    def kafka_client_options(self) -> dict[str, str]:
        return {
            (k if k.startswith("kafka.") else f"kafka.{k}"): str(v) for k, v in self.kafka_options.items()
        }

    def sql_conf(self, spark: SparkSession) -> dict[str, str]:
        """The session settings this query runs with (changed from Spark's defaults; see the class docstring)."""
        partitions = self.shuffle_partitions or max(1, spark.sparkContext.defaultParallelism)
        conf = {
            "spark.sql.shuffle.partitions": str(partitions),
            "spark.sql.streaming.stateStore.providerClass": (
                ROCKSDB_PROVIDER if self.state_store == "rocksdb" else HDFS_PROVIDER
            ),
        }
        if self.state_store == "rocksdb":
            # Commits write a small changelog instead of uploading a snapshot of the whole RocksDB instance
            # every micro-batch.
            conf["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] = "true"
        return conf


@contextmanager
def scoped_sql_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Apply ``settings`` to the session while a query starts, then restore the previous values.

    A streaming query clones the session's SQL configuration when it is created (and records the shuffle
    partitions and state store provider in its checkpoint), so the settings stay with the query while the
    caller's session is left as it was -- no setting leaks from one job into the next.
    """
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# -- Kafka in ------------------------------------------------------------------------------------------------


def read_kafka(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    topics: str,
    deployment: DeploymentOptions,
    fetch_max_wait_ms: int | None = None,
) -> DataFrame:
    """The raw Kafka stream of ``topics`` (comma-separated), with Spark's Kafka columns.

    ``fetch_max_wait_ms``: the consumers' ``fetch.max.wait.ms`` (Kafka's default: 500), for topics that
    receive records only now and then. Spark keeps a consumer per partition between micro-batches, and
    that consumer has a fetch for the next records in flight, which the broker holds until a record arrives
    or this time passes; the next micro-batch's task waits for it first (measured on UC4's feedback topic:
    520 ms per partition, 10 ms of it CPU). The deployment's ``kafka_options`` still override it."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topics)
        .option("startingOffsets", deployment.starting_offsets)
    )
    if fetch_max_wait_ms is not None:
        reader = reader.option("kafka.fetch.max.wait.ms", str(fetch_max_wait_ms))
    reader = reader.options(**deployment.kafka_client_options())
    if deployment.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(deployment.max_offsets_per_trigger))
    return reader.load()


def parse_power_records(raw: DataFrame, metric_name: str = RECORDS_METRIC) -> DataFrame:
    """Parse the Kafka stream into valid records; drop and count the malformed ones.

    A record is malformed when its key is null, its value is not a JSON object, or ``identifier``,
    ``timestamp`` or ``valueInW`` is missing, null, of the wrong type, or the timestamp is out of range.
    Malformed records never fail the query: they are counted by the observation ``metric_name`` with the
    fields ``total`` (records read) and ``malformed`` (records dropped), per micro-batch, in
    ``query.lastProgress["observedMetrics"][metric_name]`` (sum over ``query.recentProgress`` or a
    ``StreamingQueryListener`` for a run's total).

    Returns the columns :data:`PARSED_COLUMNS`; ``event_time`` is the JSON ``timestamp`` as a Spark timestamp
    (the record's own event time, which survives re-keying and UC4's feedback loop), ``kafka_timestamp`` the
    Kafka record timestamp, kept alongside.
    """
    value = F.from_json(F.col("value").cast("string"), POWER_RECORD_SCHEMA)
    parsed = raw.select(
        F.col("key").isNotNull().alias("_has_key"),
        value["identifier"].alias("identifier"),
        value["timestamp"].alias("timestamp"),
        value["valueInW"].alias("valueInW"),
        F.col("timestamp").alias("kafka_timestamp"),
        "topic",
        "partition",
        "offset",
    )
    is_valid = (
        F.col("_has_key")
        & F.col("identifier").isNotNull()
        & F.col("valueInW").isNotNull()
        & F.col("timestamp").between(0, _MAX_EPOCH_MS)  # null-safe: a null timestamp is not between
    )
    observed = parsed.withColumn("_valid", F.coalesce(is_valid, F.lit(False))).observe(
        metric_name,
        F.count(F.lit(1)).alias("total"),
        F.sum(F.when(F.col("_valid"), 0).otherwise(1)).alias("malformed"),
    )
    return observed.where("_valid").select(
        "identifier",
        "timestamp",
        "valueInW",
        # the range check above runs first, so timestamp_millis can never overflow here
        F.timestamp_millis(F.col("timestamp")).alias("event_time"),
        "kafka_timestamp",
        "topic",
        "partition",
        "offset",
    )


def with_extra_hashes(records: DataFrame, rounds: int) -> DataFrame:
    """`records` (parsed power records) made dearer by `rounds` chained SHA-256 hashes of each one's identifier
    and value, the same rows kept -- a regression to inject without a code edit (a job's ``extra_hash_rounds``,
    ``experiments/gate_quality.py``)."""
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
        raise ValueError(f"extra_hash_rounds must be a whole number >= 0, got {rounds!r}")
    if not rounds:
        return records
    digest = F.concat_ws(",", F.col("identifier"), F.col("valueInW").cast("string"))
    for _ in range(rounds):
        digest = F.sha2(digest, 256)
    # always true, but the optimiser cannot know: every record pays for the hashes
    return records.where(F.length(digest) >= 0)


# -- statistics ----------------------------------------------------------------------------------------------


def power_statistics(value: str = "valueInW") -> list[Column]:
    """UC2/UC3's summary statistics of ``value`` as native aggregates: count, sum, min, max, mean and
    population variance (``var_pop``: divides by n, as Theodolite's ``populationVariance``)."""
    column = F.col(value)
    return [
        F.count(column).alias("count"),
        F.sum(column).alias("sumInW"),
        F.min(column).alias("minInW"),
        F.max(column).alias("maxInW"),
        F.avg(column).alias("meanInW"),
        F.var_pop(column).alias("populationVarianceInW"),
    ]


STATISTICS_FIELDS = ("count", "sumInW", "minInW", "maxInW", "meanInW", "populationVarianceInW")


def epoch_millis(timestamp: Column) -> Column:
    """A Spark timestamp as epoch milliseconds (long)."""
    return F.unix_millis(timestamp)


# -- Kafka out -----------------------------------------------------------------------------------------------


def start_sink(
    records: DataFrame,
    *,
    bootstrap_servers: str,
    output_topic: str | None,
    checkpoint_dir: str,
    output_mode: Literal["append", "update"],
    deployment: DeploymentOptions,
) -> StreamingQuery:
    """Start the query that writes ``records`` (columns ``key`` and ``value``, strings, and optionally
    ``topic``) to Kafka -- or, with ``sink="noop"``, computes them and writes nothing.

    ``output_topic=None`` routes each row by its own ``topic`` column (UC4 writes to two topics at once).
    The deployment's SQL settings apply to this query only (see :func:`scoped_sql_conf`).
    """
    columns = ["key", "value"] + (["topic"] if output_topic is None else [])
    writer = (
        records.select(*columns)
        .writeStream.outputMode(output_mode)
        .option("checkpointLocation", checkpoint_dir)
    )
    if deployment.sink == "noop":
        writer = writer.format("noop")
    else:
        writer = (
            writer.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .options(**deployment.kafka_client_options())
        )
        if output_topic is not None:
            writer = writer.option("topic", output_topic)
    if deployment.available_now:
        writer = writer.trigger(availableNow=True)
    elif deployment.trigger_interval is not None:
        writer = writer.trigger(processingTime=deployment.trigger_interval)
    if deployment.query_name is not None:
        writer = writer.queryName(deployment.query_name)
    with scoped_sql_conf(records.sparkSession, deployment.sql_conf(records.sparkSession)):
        return writer.start()
