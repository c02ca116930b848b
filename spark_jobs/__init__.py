"""Theodolite's four use cases as PySpark Structured Streaming jobs on Kafka -- and the contract a user's own
job follows to be benchmarked the same way.

The job contract
----------------
A job is a module with one function::

    def start_query(spark: SparkSession, *, bootstrap_servers: str, input_topic: str, output_topic: str,
                    checkpoint_dir: str, **options: Any) -> StreamingQuery

It builds the query on ``spark``, starts it and returns the running :class:`StreamingQuery`; the caller owns
it (waits for it, reads its progress, stops it). ``checkpoint_dir`` must be fresh for a fresh run. The input
is read from ``startingOffsets=earliest``. ``options`` are the use case's parameters (say, ``window_size``)
plus the deployment options every job accepts (:class:`spark_jobs.common.DeploymentOptions`):
``trigger_interval``, ``available_now``, ``shuffle_partitions``, ``max_offsets_per_trigger``,
``state_store`` (``"default"``/``"rocksdb"``), ``watermark_delay``, ``kafka_options`` (extra ``kafka.*`` client
settings for source and sink, e.g. security), ``sink`` (``"kafka"``/``"noop"``), ``starting_offsets``,
``query_name``. An unknown option is a ``TypeError``. The benchmark runner passes ``kafka_options`` and
``max_offsets_per_trigger`` on every run (``{}`` and ``None`` where unused), and refuses, before it measures, a
job whose signature cannot take them (``pytest_theodolite.core.job_contract``).

Input records: Kafka key = sensor identifier, value = JSON ``{"identifier": "s_0", "timestamp": <epoch ms>,
"valueInW": <double>}`` (:data:`spark_jobs.common.POWER_RECORD_SCHEMA`), Kafka timestamp = event time.

Malformed records (null key, not JSON, a field missing, null or of the wrong type, timestamp out of range) are
dropped and counted, never fatal. Per micro-batch the count is in
``query.lastProgress["observedMetrics"]["records"]`` as ``total`` (records read) and ``malformed`` (dropped);
sum over ``query.recentProgress`` or in a ``StreamingQueryListener`` for a whole run. UC4 reports its feedback
topic separately as ``observedMetrics["feedback_records"]``, and the readings its stateful function drops as
later than the watermark as ``observedMetrics["late_rows"]["rows"]`` (those Spark's own filter drops are in
``stateOperators[].numRowsDroppedByWatermark``).

The jobs
--------
- :mod:`spark_jobs.uc1` database storage: convert each record to a storage document (no state).
- :mod:`spark_jobs.uc2` downsampling: tumbling windows per sensor with count/sum/min/max/mean/population
  variance.
- :mod:`spark_jobs.uc3` aggregation by time attribute: per (sensor, hour of day in a time zone), sliding
  windows, same statistics.
- :mod:`spark_jobs.uc4` hierarchical aggregation: sensor groups and groups of groups from a registry on a
  configuration topic, sums fed back through a feedback topic.

UC1-UC3 pass every record through native Spark SQL only (no Python UDF, pandas UDF or Python state function),
so no Python worker limits their throughput. UC4 keeps each child's latest value per (group, window) in a
Python state function (``applyInPandasWithState``, called once per bucket of groups and window, not per group),
and reads its registry with a second, small query, which the :class:`StreamingQuery` it returns stops with
itself. This package imports neither pytest nor pytest_theodolite: it runs on any Spark 4 cluster with the
``spark-sql-kafka-0-10`` connector.

Spark settings the jobs change, for the query only (the caller's session is restored after the start):
``spark.sql.shuffle.partitions`` = the cluster's cores unless given (Spark's 200 means 200 tasks and 200
state-store commits per micro-batch for a few keys), ``spark.sql.streaming.stateStore.providerClass`` per
``state_store``, and RocksDB changelog checkpointing when RocksDB is chosen.
"""

from __future__ import annotations

__all__ = ["common", "uc1", "uc2", "uc3", "uc4"]
