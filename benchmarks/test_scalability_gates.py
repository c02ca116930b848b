"""The scalability gates: each use case's demand function along Theodolite's load dimension, compared with
the baseline in baselines/<benchmark>.json.

Sized for a 2-core CI machine: every instance is limited to a quarter core (cgroups), so 1...4 instances are
told apart while broker, generator and driver keep a core. Each sub-experiment follows the gates' default
protocol (docs/how-it-works.md); the lag trend decides (UC3: with its micro-batch bound), below 5 % of the load.

Loads, as recorded in baselines/: UC1 4 000 / 12 000 / 20 000 -> 1 / 2 / 4 instances; UC2 4 000 / 16 000 /
20 000 -> 1 / 2 / 2; UC3 2 000 / 8 000 / 16 000 -> 1 / 2 / 4; UC4 12 / 20 / 26 elements per group -> 1 / 2 / 4.
Loads at a capacity edge, whose verdict flips between runs, were left out; how each load was chosen, with the
measurements behind it: docs/lab-notes/gates.md.
"""

import pytest
from usecases import QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_ELEMENTS

# cost_tolerance: the CPU per record at each load's demand may rise this much over the baseline's before a
# point fails even at the same demand (and only beyond its noise). Set from how far the figure of unchanged code
# moves between hosts of this kind, not within one: at a point whose instances run near their quota it reads
# about quota / load, and UC1's 20 000 on four read 26-39 % above its baseline on seven hosts in a row, which
# 8 % failed twice (docs/lab-notes/gates.md, 2026-12-05).
GATE = dict(
    resources=[1, 2, 3, 4],
    instance_cpu=0.25,
    threshold="5%",
    strategy="baseline-guess+lower-bound",
    spark_conf=QUICK_WARMUP_EXECUTORS,
    cost_tolerance="30%",
)


@pytest.mark.theodolite(UC1_KEYS, loads=[4000, 12000, 20000], **GATE)
def test_uc1_database_storage(theodolite_gate):
    theodolite_gate.check()


@pytest.mark.theodolite(UC2_KEYS, loads=[4000, 16000, 20000], **GATE)
def test_uc2_downsampling(theodolite_gate):
    theodolite_gate.check()


# UC3 runs on a 5 s trigger (benchmarks/usecases.py); a job that cannot keep up lengthens its batches, and UC3's
# per-batch work then spreads over more records, so its lag can stay flat while the job no longer keeps its
# schedule. Its batches must keep the cadence too: max_batch_duration 7.5 s = 1.5 trigger intervals. Its CPU per
# record also moves with how the batches fall against the trigger (10 % between runs on one host at 8 000).
@pytest.mark.theodolite(UC3_KEYS, loads=[2000, 8000, 16000], **{**GATE, "max_batch_duration": 7.5})
def test_uc3_aggregation_by_time_attribute(theodolite_gate):
    theodolite_gate.check()


# UC4 along the method's hierarchy dimension "number of elements in groups" (benchmarks/usecases.py: depth 3,
# `elements` members per group -> elements**3 sensors); 12 / 20 / 26 elements are 1 728 / 8 000 / 17 576
# records/s. 26 sits at the edge between three and four instances; the baseline holds the upper one. What a
# longer micro-batch costs UC4 is correctness, not lag (results that arrive after the watermark are dropped and
# counted); the gate does not bound them (max_late_rate), as a bound of 0 would fail most points.
@pytest.mark.theodolite(UC4_ELEMENTS, loads=[12, 20, 26], **GATE)
def test_uc4_hierarchical_aggregation(theodolite_gate):
    theodolite_gate.check()
