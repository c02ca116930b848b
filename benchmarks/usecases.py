"""The four Theodolite use cases as benchmarks: a job and the workload along its load dimension."""

from dataclasses import replace

from pytest_theodolite import Benchmark, Workload
from spark_jobs import uc1, uc2, uc3, uc4

#: UC1-UC3 scale with the number of sensor keys, each sending one record a second (Theodolite's dimension)
UC1_KEYS = Benchmark("uc1-keys", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=4)
UC2_KEYS = Benchmark(
    "uc2-keys",
    uc2.start_query,
    lambda keys: Workload(keys=keys),
    input_partitions=4,
    job_options={"window_size": "10 seconds", "watermark_delay": "2 seconds"},
)
#: UC3 emits the windows it changed every 5 s, as Theodolite's Kafka Streams UC3 does (its record cache flushes
#: on the 5 s commit interval; Flink's UC3 fires every 15 s). Every key sends once a second, so every micro-batch
#: holds every key and updates, stores and writes all keys x 6 windows whatever its length: with Spark's
#: default trigger (next batch at once) the CPU per record rose from 56 to 103 us from one to two instances at
#: 4 000 keys (shorter batches, the same per-batch work), and a second instance added almost nothing; with
#: the 5 s trigger, 55 and 56 us (docs/lab-notes/gates.md).
UC3_KEYS = Benchmark(
    "uc3-keys",
    uc3.start_query,
    lambda keys: Workload(keys=keys),
    input_partitions=4,
    job_options={
        "window_size": "1 minute",
        "window_advance": "10 seconds",
        "watermark_delay": "2 seconds",
        "trigger_interval": "5 seconds",
    },
)
#: UC4 scales with the number of nested groups: 4 children per group, `depth` levels -> 4**depth sensors, each
#: sending once a second as in Theodolite.
UC4_DEPTH = Benchmark(
    "uc4-depth",
    uc4.start_query,
    lambda depth: Workload.for_hierarchy(children=4, depth=depth),
    input_partitions=4,
    extra_topics=("config_topic", "feedback_topic"),
    registry_topic_option="config_topic",
    job_options={"window_size": "10 seconds", "watermark_delay": "5 seconds"},
)
#: UC4's other hierarchy dimension (the method's "number of elements in groups"): the
#: depth stays 3 (groups of groups of sensors, two feedback hops to the root) and every group gets `elements`
#: members -> elements**3 sensors. Depth grows the load 4x a step, too coarse to give a 2-core testbed points
#: whose demand is 1, 2 and 3 (with a job whose demand is linear in its load, demand 2 at depth d makes depth
#: d + 1 need 5 to 8 instances); elements grow it by 1.2-1.4x a step between 8 and 16. UC4's gate (see its
#: comment for the measured points).
UC4_HIERARCHY_DEPTH = 3
UC4_ELEMENTS = replace(
    UC4_DEPTH,
    name="uc4-elements",
    workload=lambda elements: Workload.for_hierarchy(children=elements, depth=UC4_HIERARCHY_DEPTH),
)

#: every benchmark above by its name (the scripts' --benchmark)
BENCHMARKS = {b.name: b for b in (UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_DEPTH, UC4_ELEMENTS)}

#: Executor JVMs for short, CPU-limited sub-experiments: at a quarter core, C2's compiler threads eat the
#: quota for most of a minute (measured: the first batches took 16 s and the lag only turned after 25 s);
#: compiling with C1 only reaches a lower peak within seconds. Serial GC: one core needs no parallel GC threads.
QUICK_WARMUP_EXECUTORS = {"spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
