"""UC4 hierarchical aggregation: sum the readings of sensor groups, and of groups of groups, per window.

Data flow (Theodolite's, in Spark SQL):

1. The sensor registry (a tree of groups whose leaves are sensors) arrives as JSON on ``config_topic``; the
   latest record there is the registry in force. A second, small streaming query reads that topic, turns the
   newest registry into (child, parent) pairs (step 2) and keeps them in an in-memory table, which the main
   query joins as a static table: a new registry takes effect within about a second, without a restart, and
   no micro-batch re-reads the registry topic (a static Kafka DataFrame would be re-read in every one).
2. The registry becomes (child, parent) pairs: every sensor and every group with its direct parent group.
3. Readings from ``input_topic`` and group results from ``feedback_topic`` are joined with the pairs, which
   duplicates each reading to its parent group (a sensor listed in several groups goes to each).
4. An arbitrary stateful operator (``applyInPandasWithState``) keeps, per group and window, each child's
   *latest* value (latest by event time, then Kafka offset -- later versions of a group's result in the
   feedback topic replace earlier ones) and reports their sum, as Theodolite's UC4 does. Its state is bounded
   by the groups' numbers of children, not by the number of readings. The operator's key is (bucket, window),
   a bucket holding the groups whose identifiers hash to it (``state_buckets``, 16): Spark calls the Python
   function once per key and micro-batch, and that call's fixed cost (Arrow to pandas and back, the state
   row) keyed per group was paid for every group in every micro-batch -- most of UC4's CPU under a constant
   load, and more of it the shorter the batches, so more instances bought little capacity.
5. Results go to ``output_topic`` and to ``feedback_topic``; from there they re-enter step 3 as readings of
   the group, so a group of groups sums its subgroups' results. Each level up costs one more micro-batch.

Because results must re-enter the aggregation while their window is still open, UC4 runs in update mode:
every micro-batch writes the current sum of each (group, window) it changed, and a consumer keeps the last
record per (key, windowStart). ``watermark_delay`` (default: 1 minute) must exceed the time results take to
travel up the hierarchy, or the upper levels' contributions arrive after their window was dropped.

Output (both topics): key = group identifier, value = ``{"identifier", "timestamp" (latest event time
summed), "valueInW" (= "sumInW", so that the record parses as a reading), "sumInW", "childCount",
"averageInW" (sum / childCount), "windowStart", "windowEnd"}``.

Registry JSON: ``{"identifier": "root", "name": "...", "children": [{"identifier": "g", "children": [...]},
{"identifier": "s_0", "name": "..."}]}``, or that object under ``"topLevelSensor"`` (Theodolite's own).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from .common import (
    LATE_ROWS_METRIC,
    RECORDS_METRIC,
    DeploymentOptions,
    epoch_millis,
    parse_power_records,
    read_kafka,
    scoped_sql_conf,
    start_sink,
    with_extra_hashes,
)

DEFAULT_WINDOW_SIZE = "1 minute"
DEFAULT_WATERMARK_DELAY = "1 minute"
#: levels of groups below the root the registry may have; a deeper registry fails the query (config error)
DEFAULT_MAX_HIERARCHY_DEPTH = 16
#: ``fetch.max.wait.ms`` of UC4's readers: its feedback topic gets a few records per micro-batch, and with
#: Kafka's 500 ms a micro-batch's task for each of its partitions waited that long for the fetch left in flight
SPARSE_TOPIC_FETCH_WAIT_MS = 10
#: how often the registry query looks for a new registry (a look costs one offsets request, no Spark job)
REGISTRY_POLL_INTERVAL = "1 second"
#: observation counting the records read back from the feedback topic (``observedMetrics[...]``)
FEEDBACK_METRIC = "feedback_records"
#: groups share a state key per window in this many buckets (see the module's step 4): enough that the keys of
#: one or two open windows spread over a few state partitions, few enough that a micro-batch makes few calls
DEFAULT_STATE_BUCKETS = 16

# children stay raw JSON strings (Spark's JSON reader keeps a nested object as its text for a string field)
# and are parsed one level at a time: a fixed Spark schema cannot describe a tree of any depth
_NODE_SCHEMA = "identifier STRING, children ARRAY<STRING>"


def start_registry_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    config_topic: str,
    checkpoint_dir: str,
    max_depth: int,
    deployment: DeploymentOptions,
) -> StreamingQuery:
    """Start the query that keeps the (child, parent) pairs of the newest record of ``config_topic`` in an
    in-memory table named after the query (``query.name``), and return it once it has read what the topic
    holds now.

    A streaming read of the registry topic, not a static one: a static Kafka DataFrame joined to a stream is
    re-planned and re-read in every micro-batch (a Kafka scan, a shuffle and a parse per batch). This query
    reads a registry record once, when it arrives, and the main query's join reads the in-memory table (a
    local scan on the driver). A new registry takes effect at the first main micro-batch planned after this
    query processed it (it looks for one every second)."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", config_topic)
        .option("startingOffsets", "earliest")
        .options(**deployment.kafka_client_options())
        .load()
    )
    newest = (
        raw.where(F.col("value").isNotNull())
        .groupBy()
        .agg(
            F.max_by(F.col("value").cast("string"), F.struct("timestamp", "partition", "offset")).alias(
                "registry"
            )
        )
    )
    # complete mode: the table always holds the pairs of the newest registry, nothing of older ones
    writer = (
        child_parent_pairs(newest, max_depth)
        .writeStream.format("memory")
        .outputMode("complete")
        .queryName(f"uc4_registry_{uuid.uuid4().hex}")
        .option("checkpointLocation", checkpoint_dir)
    )
    writer = (
        writer.trigger(availableNow=True)
        if deployment.available_now
        else writer.trigger(processingTime=REGISTRY_POLL_INTERVAL)
    )
    with scoped_sql_conf(spark, {"spark.sql.shuffle.partitions": "1"}):  # one registry, one state row
        query = writer.start()
    try:
        query.processAllAvailable()
    except BaseException:
        stop_registry_query(spark, query)
        raise
    return query


class RegistryFedQuery(StreamingQuery):
    """UC4's query as one handle: the aggregation (this object's own id, name and progress) and the registry
    query it reads its (child, parent) pairs from, which it stops with itself and whose failure it reports."""

    def __init__(self, spark: SparkSession, main: StreamingQuery, registry: StreamingQuery) -> None:
        super().__init__(main._jsq)
        self.registry = registry
        self._spark = spark

    @property
    def isActive(self) -> bool:
        return super().isActive and self.registry.isActive

    def exception(self) -> Any:
        return super().exception() or self.registry.exception()

    def processAllAvailable(self) -> None:
        # a registry published before the readings must be in force before they are processed
        self.registry.processAllAvailable()
        super().processAllAvailable()

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            stop_registry_query(self._spark, self.registry)


def stop_registry_query(spark: SparkSession, registry: StreamingQuery) -> None:
    """Stop the registry query and drop its in-memory table."""
    registry.stop()
    spark.catalog.dropTempView(registry.name)


def _child_parent_pairs(node_json: Column, levels: int) -> Column:
    """``array<struct<child, parent>>`` of every node below ``node_json`` down to ``levels`` levels, as one
    native expression (nested ``transform``s, linear in ``levels``)."""
    node = F.from_json(node_json, _NODE_SCHEMA)
    children = F.coalesce(node["children"], F.array().cast("array<string>"))
    direct = F.transform(
        children,
        lambda child: F.struct(
            F.from_json(child, _NODE_SCHEMA)["identifier"].alias("child"), node["identifier"].alias("parent")
        ),
    )
    if levels == 1:
        too_deep = F.exists(children, lambda child: F.size(F.from_json(child, _NODE_SCHEMA)["children"]) > 0)
        return F.when(
            too_deep, F.raise_error(F.lit("UC4: the sensor registry is deeper than max_hierarchy_depth"))
        ).otherwise(direct)
    below = F.flatten(F.transform(children, lambda child: _child_parent_pairs(child, levels - 1)))
    return F.concat(direct, below)


def child_parent_pairs(registry: DataFrame, max_depth: int) -> DataFrame:
    """Registry -> rows (``child``, ``parent``): each sensor and group with its direct parent group."""
    root = F.coalesce(F.get_json_object("registry", "$.topLevelSensor"), F.col("registry"))
    return (
        registry.select(F.explode(_child_parent_pairs(root, max_depth)).alias("pair"))
        .select("pair.child", "pair.parent")
        .where(F.col("child").isNotNull() & F.col("parent").isNotNull())
    )


#: the stateful operator's output: one row per (group, window) a call changed
GROUP_RESULT_SCHEMA = (
    "identifier STRING, timestamp LONG, sumInW DOUBLE, childCount INT, windowStart LONG, windowEnd LONG"
)
#: ``latest``: JSON object group -> child -> [timestamp, offset, valueInW], for the groups of one bucket and
#: window; bounded by their numbers of children
GROUP_STATE_SCHEMA = "latest STRING"


def latest_per_child(
    key: tuple[Any, ...], batches: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """One (bucket, window): fold this micro-batch's readings (column ``identifier``: the group they count
    for) into each group's latest version per child (by event time, then Kafka offset) and emit the sum of
    every group that got a reading. The state holds one version per child of each group, however many
    readings arrive; it is dropped when the watermark passes the window's end."""
    if state.hasTimedOut:
        state.remove()
        return
    _bucket, window_start, window_end = key
    if window_end <= state.getCurrentWatermarkMs():
        # A late reading of a closed window: dropped, as an aggregation drops it. The window's state, if its
        # timeout has not fired yet, goes now (a timeout before the watermark is refused anyway).
        if state.exists:
            state.remove()
        # Spark's own late-row filter goes by the previous micro-batch's watermark, so these rows are not in its
        # numRowsDroppedByWatermark: one row with the count as a negative childCount, which aggregate_groups
        # turns into the LATE_ROWS_METRIC observation and removes
        dropped = sum(len(readings) for readings in batches)
        if dropped:
            yield pd.DataFrame(
                {
                    "identifier": [""],
                    "timestamp": [0],
                    "sumInW": [0.0],
                    "childCount": [-dropped],
                    "windowStart": [int(window_start)],
                    "windowEnd": [int(window_end)],
                }
            )
        return
    groups: dict[str, dict[str, list[Any]]] = json.loads(state.get[0]) if state.exists else {}
    changed: dict[str, dict[str, list[Any]]] = {}  # the groups that got a reading, in order of arrival
    # plain Python over the columns as lists: pandas' per-call overhead (sort, de-duplicate) cost ~5x this
    # loop (experiments/bench_uc4_state.py)
    for readings in batches:
        for group, child, timestamp, offset, value in zip(
            readings["identifier"].tolist(),
            readings["child"].tolist(),
            readings["timestamp"].tolist(),
            readings["offset"].tolist(),
            readings["valueInW"].tolist(),
            strict=True,
        ):
            latest = changed.get(group)
            if latest is None:
                latest = changed[group] = groups.setdefault(group, {})
            known = latest.get(child)
            if known is None or (timestamp, offset) > (known[0], known[1]):
                latest[child] = [timestamp, offset, value]
    if not groups:
        return
    state.update((json.dumps(groups),))
    # Spark clears a key's timeout at every call: set it again, or the window's state is never dropped
    state.setTimeoutTimestamp(int(window_end))
    if not changed:
        return
    versions = list(changed.values())
    yield pd.DataFrame(
        {
            "identifier": list(changed),
            "timestamp": [max(version[0] for version in latest.values()) for latest in versions],
            "sumInW": [sum(version[2] for version in latest.values()) for latest in versions],
            "childCount": [len(latest) for latest in versions],
            "windowStart": [int(window_start)] * len(versions),
            "windowEnd": [int(window_end)] * len(versions),
        }
    )


def aggregate_groups(
    readings: DataFrame, pairs: DataFrame, *, window_size: str, state_buckets: int = DEFAULT_STATE_BUCKETS
) -> DataFrame:
    """Readings (sensors and fed-back groups) -> per (group, window) the sum of each child's latest value."""
    # the registry is tiny: broadcasting it keeps the stream from being shuffled for the join
    joined = readings.join(F.broadcast(pairs), readings["identifier"] == pairs["child"])
    window = F.window("event_time", window_size)
    keyed = joined.select(
        F.pmod(F.hash("parent"), F.lit(state_buckets)).alias("bucket"),
        F.col("parent").alias("identifier"),
        epoch_millis(window.start).alias("windowStart"),
        epoch_millis(window.end).alias("windowEnd"),
        "child",
        "timestamp",
        "offset",
        "valueInW",
        "event_time",  # carries the watermark, which the event-time timeout needs
    )
    # An arbitrary stateful operator, not groupBy().agg(): an aggregation would have to keep every version
    # of every child (collect_list) to pick the latest per child, and that state grows with every reading.
    grouped = keyed.groupBy("bucket", "windowStart", "windowEnd").applyInPandasWithState(
        latest_per_child,
        outputStructType=GROUP_RESULT_SCHEMA,
        stateStructType=GROUP_STATE_SCHEMA,
        outputMode="update",
        timeoutConf=GroupStateTimeout.EventTimeTimeout,
    )
    # the readings latest_per_child dropped as late (its rows with a negative childCount): counted, not written
    late = F.sum(F.when(F.col("childCount") < 0, -F.col("childCount")).otherwise(0))
    counted = grouped.observe(LATE_ROWS_METRIC, F.coalesce(late, F.lit(0)).cast("long").alias("rows"))
    return counted.where(F.col("childCount") >= 0)


def as_kafka_records(results: DataFrame, *, output_topic: str, feedback_topic: str) -> DataFrame:
    """Group results -> Kafka records (``key``, ``value``, ``topic``), each result once for ``output_topic`` and
    once for ``feedback_topic``: the Kafka sink routes each row by its ``topic`` column, so a single query
    writes the output and the feedback (no foreachBatch)."""
    # named columns first, then a struct of plain references: with aliases inside ``struct`` (two fields over
    # the same ``sumInW``) Spark 4.0 wrote JSON with a field missing and another named ``col6``
    results = results.withColumns(
        {"valueInW": F.col("sumInW"), "averageInW": F.col("sumInW") / F.col("childCount")}
    )
    value = F.to_json(
        F.struct(
            "identifier",
            "timestamp",
            "valueInW",
            "sumInW",
            "childCount",
            "averageInW",
            "windowStart",
            "windowEnd",
        )
    )
    return results.select(
        F.col("identifier").alias("key"),
        value.alias("value"),
        F.explode(F.array(F.lit(output_topic), F.lit(feedback_topic))).alias("topic"),
    )


def start_query(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    input_topic: str,
    output_topic: str,
    checkpoint_dir: str,
    config_topic: str,
    feedback_topic: str,
    window_size: str = DEFAULT_WINDOW_SIZE,
    max_hierarchy_depth: int = DEFAULT_MAX_HIERARCHY_DEPTH,
    state_buckets: int = DEFAULT_STATE_BUCKETS,
    extra_hash_rounds: int = 0,
    **options: Any,
) -> StreamingQuery:
    """Start UC4 and return the running query: a :class:`RegistryFedQuery`, whose ``stop()`` also stops the
    registry query (``.registry``) and whose ``processAllAvailable()`` first lets it read a new registry.

    ``config_topic``: where the sensor registry is published; ``feedback_topic``: where group results are
    written and read back (create it beforehand, it must differ from ``input_topic``); ``window_size``:
    tumbling window (``"1 minute"``); ``max_hierarchy_depth``: levels of groups the registry may have (16);
    ``state_buckets``: how many state keys per window the groups share (16; see the module's step 4);
    ``extra_hash_rounds``: that many SHA-256 hashes more per sensor reading (not per fed-back group result), the
    same output (common.with_extra_hashes: a regression to inject).
    ``options``: the deployment options of :class:`spark_jobs.common.DeploymentOptions` (``watermark_delay``
    defaults to 1 minute; ``sink="noop"`` is refused: without the feedback topic there is no UC4).
    The observations are ``records`` (input topic) and ``feedback_records`` (feedback topic).
    """
    deployment = DeploymentOptions.from_options(options)
    if deployment.sink != "kafka":
        raise ValueError("UC4 needs the Kafka sink: its results feed back into the aggregation")
    if feedback_topic in (input_topic, output_topic):
        raise ValueError("UC4's feedback_topic must differ from its input and output topics")
    if max_hierarchy_depth < 1:
        raise ValueError(f"max_hierarchy_depth must be >= 1, got {max_hierarchy_depth}")
    if state_buckets < 1:
        raise ValueError(f"state_buckets must be >= 1, got {state_buckets}")

    def readings_of(topic: str, metric: str) -> DataFrame:
        raw = read_kafka(
            spark,
            bootstrap_servers=bootstrap_servers,
            topics=topic,
            deployment=deployment,
            fetch_max_wait_ms=SPARSE_TOPIC_FETCH_WAIT_MS,
        )
        return parse_power_records(raw, metric).select(
            "identifier", "timestamp", "offset", "valueInW", "event_time"
        )

    readings = (
        with_extra_hashes(readings_of(input_topic, RECORDS_METRIC), extra_hash_rounds)
        .unionByName(readings_of(feedback_topic, FEEDBACK_METRIC))
        .withWatermark("event_time", deployment.watermark_delay or DEFAULT_WATERMARK_DELAY)
    )
    registry = start_registry_query(
        spark,
        bootstrap_servers=bootstrap_servers,
        config_topic=config_topic,
        checkpoint_dir=f"{checkpoint_dir.rstrip('/')}/registry",
        max_depth=max_hierarchy_depth,
        deployment=deployment,
    )
    try:
        results = aggregate_groups(
            readings, spark.table(registry.name), window_size=window_size, state_buckets=state_buckets
        )
        main = start_sink(
            as_kafka_records(results, output_topic=output_topic, feedback_topic=feedback_topic),
            bootstrap_servers=bootstrap_servers,
            output_topic=None,
            checkpoint_dir=checkpoint_dir,
            output_mode="update",
            deployment=deployment,
        )
    except BaseException:
        stop_registry_query(spark, registry)
        raise
    return RegistryFedQuery(spark, main, registry)
