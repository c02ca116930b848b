"""The scalability gates: each use case's demand function along Theodolite's load dimension, compared with
the baseline in baselines/<benchmark>.json.

Sized for a 2-core CI machine: every instance is limited to a quarter core (cgroups), so 1...4 instances are
told apart while broker, generator and driver keep a core. Each sub-experiment follows the gates' default
protocol (pytest_theodolite/protocol.py): the job is primed on the real load without the CPU limit (class
loading, code generation and JIT at a quarter core took ~100 s on a fresh CI machine and made verdicts follow
the host), the warm-up ends when the micro-batch durations stop falling (at most 90 s), and the measurement
runs from 20 s until the lag slope's 95 % interval lies on one side of the threshold (at most 120 s). One
SLO decides: the lag trend (slope of the lag sampled once per finished micro-batch) below 5 % of the load.
A fixed micro-batch duration bound (``max_batch_duration``) stays available but decides none of these gates:
where a point's steady batch time sits near such a bound, the host's speed decides the verdict.
"""

import pytest
from usecases import QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_DEPTH

GATE = dict(resources=[1, 2, 3, 4], instance_cpu=0.25, threshold="5%", strategy="linear+lower-bound",
            spark_conf=QUICK_WARMUP_EXECUTORS)


@pytest.mark.theodolite(UC1_KEYS, loads=[2000, 6000, 12000], **GATE)
def test_uc1_database_storage(theodolite_gate):
    theodolite_gate.check()


@pytest.mark.theodolite(UC2_KEYS, loads=[1000, 4000, 8000], **GATE)
def test_uc2_downsampling(theodolite_gate):
    theodolite_gate.check()


# UC3 stops scaling past ~3 000 records/s at a quarter core per instance: its micro-batches keep a cost that
# more instances do not share (six sliding windows per record, state commits); see the UC3/UC4 scaling issue.
@pytest.mark.theodolite(UC3_KEYS, loads=[1000, 3000], **GATE)
def test_uc3_aggregation_by_time_attribute(theodolite_gate):
    theodolite_gate.check()


# UC4 joins every reading with the registry, re-reads the registry and feeds results back each micro-batch, so
# it gets half a core per instance. Its per-batch costs dominate: at depth 5 and 6 (1 024 and 4 096
# records/s) one half-core instance still kept up, so this gate does not yet exercise more instances.
@pytest.mark.theodolite(UC4_DEPTH, loads=[2, 3, 4], **{**GATE, "instance_cpu": 0.5})
def test_uc4_hierarchical_aggregation(theodolite_gate):
    theodolite_gate.check()
