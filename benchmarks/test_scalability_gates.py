"""The scalability gates: each use case's demand function along Theodolite's load dimension, compared with
the baseline in baselines/<benchmark>.json.

Sized for a 2-core CI machine: every instance is limited to a quarter core (cgroups), so 1...4 instances are
told apart while broker, generator and driver keep a core; 30 s warm-up and 15 s of measurement per
sub-experiment (Theodolite: 60 s and 5 min) -- raise them with --theodolite-warmup / --theodolite-duration
for a careful run. The warm-up covers the start transient: at a quarter core the first micro-batch runs for
~12 s (class loading, code generation, JIT) and at UC1's highest load four instances needed ~45 s to work off
the backlog it leaves; with 20 s that point passed in one run and failed in the next. Two SLOs: the lag trend
(slope below 5 % of the load) and a median micro-batch duration of at most 3 s (a micro-batch engine that
falls behind grows its batches, which a short lag fit can miss).
"""

import pytest
from usecases import QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_DEPTH

GATE = dict(resources=[1, 2, 3, 4], instance_cpu=0.25, duration=15, warmup=30, threshold="5%",
            max_batch_duration=3, strategy="linear+lower-bound", spark_conf=QUICK_WARMUP_EXECUTORS)


@pytest.mark.theodolite(UC1_KEYS, loads=[2000, 6000, 12000], **GATE)
def test_uc1_database_storage(theodolite_gate):
    theodolite_gate.check()


@pytest.mark.theodolite(UC2_KEYS, loads=[1000, 4000, 8000], **GATE)
def test_uc2_downsampling(theodolite_gate):
    theodolite_gate.check()


# UC3 stops scaling past ~3 000 records/s at a quarter core per instance: its micro-batches keep a cost that
# more instances do not share (presumably six sliding windows per record and state commits). Measured batch
# durations in the measurement window: 3 000 at r=2 ~1.6 s, but 4 000 at r=2 3.1 s (fail) and r=3 2.7-3.1 s,
# 5 000 at r=2 2.4-3.1 s (passed in 3 of 4 runs), 7 000 failed at r=4. A gate point that close to the 3 s
# bound flips between runs, so the gate stops at 3 000.
@pytest.mark.theodolite(UC3_KEYS, loads=[1000, 3000], **GATE)
def test_uc3_aggregation_by_time_attribute(theodolite_gate):
    theodolite_gate.check()


# UC4 joins every reading with the registry, re-reads the registry and feeds results back each micro-batch:
# at a quarter core its first batches alone outlast the warm-up, so it gets half a core and a looser batch
# bound (measured: 8-13 s batches at 800 records/s on one full core with 20 ms periods). Its per-batch costs
# dominate: at depth 5 and 6 (1 024 and 4 096 records/s) one half-core instance still kept up.
@pytest.mark.theodolite(UC4_DEPTH, loads=[2, 3, 4],
                        **{**GATE, "instance_cpu": 0.5, "max_batch_duration": 10, "threshold": "25%"})
def test_uc4_hierarchical_aggregation(theodolite_gate):
    theodolite_gate.check()
