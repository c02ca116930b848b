"""The scalability gates: each use case's demand function along Theodolite's load dimension, compared with
the baseline in baselines/<benchmark>.json.

Sized for a 2-core CI machine: every instance is limited to a quarter core (cgroups), so 1...4 instances are
told apart while broker, generator and driver keep a core. Each sub-experiment follows the gates' default
protocol (pytest_theodolite/protocol.py): the job is primed on the real load without the CPU limit (class
loading, code generation and JIT at a quarter core took ~100 s on a fresh CI machine and made verdicts follow
the host), the warm-up ends when the micro-batch durations stop falling (at most 90 s), and the measurement
runs from 20 s until the lag slope's 95 % interval lies on one side of the threshold (at most 120 s). One
SLO decides (UC3: two): the lag trend (slope of the lag sampled once per finished micro-batch) below 5 % of
the load.
A micro-batch duration bound (``max_batch_duration``) decides only UC3's gate, whose job runs on a 5 s trigger
and whose bound is that cadence (1.5 intervals); as a fixed bound for a job without a trigger it would let the
host's speed decide wherever a point's steady batch time sits near it.

Loads (recorded on a 2-core CI machine, baselines/): UC1 4 000 / 12 000 / 20 000 -> 1 / 2 / 4 instances;
UC2 4 000 / 16 000 / 20 000 -> 1 / 2 / 2; UC3 2 000 / 8 000 / 16 000 -> 1 / 2 / 4; UC4 depth 4 / 6 -> 1 / 2.
Loads at a capacity edge flip between runs and were left out: UC2 12 000 measured 2 instances (one instance
falling behind) in one run and 1 (slope -16 [-515, 483] vs 600 records/s) in the next; UC1 28 000 at 4
instances (-889 [-3007, 1228] vs 1 400) and UC2 28 000 at 2 (984 [658, 1310] vs 1 400) sat near the threshold.
"""

import pytest
from usecases import QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_DEPTH

# cost_tolerance: the CPU per record at each load's demand may rise this much over the baseline's before a
# point fails even at the same demand (and only when its interval lies wholly above the baseline's). Set from
# the figure's run-to-run spread on one 2-core host (3 runs, benchmarks/scripts/gate_quality.py): UC1-UC3
# points varied by a coefficient of variation of 0.5-4 % (UC1 20 000 at 4 instances the most), UC4's by 3-10 %.
GATE = dict(
    resources=[1, 2, 3, 4],
    instance_cpu=0.25,
    threshold="5%",
    strategy="baseline-guess+lower-bound",
    spark_conf=QUICK_WARMUP_EXECUTORS,
    cost_tolerance="8%",
)


@pytest.mark.theodolite(UC1_KEYS, loads=[4000, 12000, 20000], **GATE)
def test_uc1_database_storage(theodolite_gate):
    theodolite_gate.check()


@pytest.mark.theodolite(UC2_KEYS, loads=[4000, 16000, 20000], **GATE)
def test_uc2_downsampling(theodolite_gate):
    theodolite_gate.check()


# UC3 runs on a 5 s trigger (benchmarks/usecases.py); its demand is decided by the lag trend and by its batches
# keeping that cadence. A micro-batch engine that cannot keep up lengthens its batches, and UC3's per-batch work
# (all keys x 6 windows) then spreads over more records, so its lag can stop growing while the job no longer
# keeps its schedule: 16 000 records/s on 3 instances had a flat lag (+109 [-565, +783] vs 800 records/s) in
# 10 s batches. max_batch_duration 7.5 s = 1.5 trigger intervals (median batch after the warm-up). Measured with
# benchmarks/scripts/gate_points.py (2026-11-22): 8 000 on 1 instance 12.2 s batches at 98 % of its quota
# (there the lag trend failed too, +1 892 [+473, +3 311] vs 400; in the recording and the two clean gate runs
# only the bound did: 14.8 s, lag +71 ... +180), on 2 4.4 s (77 %); 16 000 on 2 12.1 s, on 3 10.0 s, on 4 6.5 s
# (76 % of the quota: the host's broker, generator and driver are the limit there; 5.2 s in the recording);
# 12 000 on 2 passed at 95 % of the quota with 7.2 s batches -- an edge, left out.
# cost_tolerance 30 %: on the 5 s trigger the CPU per record moves with how the batches fall against it; over the
# recording and two clean runs (benchmarks/scripts/cost_spread.py) 8 000 on 2 instances varied by a coefficient
# of variation of 10 % (46.7 ... 56.9 us, +22 %), 2 000 by 5 %, 16 000 by 0.5 %; 8 % flagged one of the clean
# runs (+13 %), 30 % none of the 18 leave-one-out pairs.
@pytest.mark.theodolite(
    UC3_KEYS, loads=[2000, 8000, 16000], **{**GATE, "max_batch_duration": 7.5, "cost_tolerance": "30%"}
)
def test_uc3_aggregation_by_time_attribute(theodolite_gate):
    theodolite_gate.check()


# UC4 gets half a core per instance: its Python state function, second (registry) query and feedback loop make
# its per-batch costs the largest. At a quarter core (measured 2026-11-22, depth 4 / 5 / 6 -> 1 / 1 / 3
# instances) its instances ran at 89 % and 97 % of their quota at depth 4 and 5, and depth 6 passed on three
# only at the edge (-53 [-310, 203] vs 205 records/s): capacity edges, which flip between runs. At half a core:
# 78 % / 87 % / 85 % (2 instances), depth 6 on two at -477 [-776, -179]. Re-recorded 2026-11-22 for the
# registry query, the shorter Kafka fetch wait and the worker daemon (UC4 was 2-4 -> 1 / 1 / 1 before). Depth 5
# (1 instance at 87 % of its quota) was left out: a third one-instance point near an edge, and a minute of a
# gate run that UC4's depth 6 made 21.5 min long.
# No point with a demand of 3 or more fits this testbed yet: depth grows the load 4x a step, and smaller instances
# do not give UC4 more of them to scale over. At 0.2 core (benchmarks/scripts/gate_points.py --uc 4
# --instance-cpu 0.2, 2026-11-23) depth 4 passed on one (-1 [-13, +12] vs 13) and depth 5 on two
# (+10 [-30, +51] vs 51), both at the edge, and depth 6 fell behind on four and on five (36.9 / 26.4 s batches,
# 98 % / 89 % of the quota) -- 1.0 core as five fifth-core instances fails where two half-core ones pass.
# Along the method's other hierarchy dimension (elements per group at depth 3, benchmarks/usecases.py
# UC4_ELEMENTS; gate_points.py --benchmark uc4-elements --instance-cpu 0.25, 2026-11-24, e16ecf6) the lag
# trend alone gives no demand of 3 either: 6 / 9 elements (216 / 729 sensors) pass on one instance (-2 [-14, +9]
# vs 11, -85 [-204, +33] vs 36), 12 (1 728) fails on one (+422 [+107, +738] vs 86) and passes on two and three,
# and 16 (4 096) passes on two (-598 [-1 392, +196] vs 205) and three, but FAILS on four (+779 [+299, +1 260]).
# Spark's micro-batches stretch to absorb the load (two instances at 16: 18.3 s batches, 96 % of the quota)
# while more instances shorten them and pay UC4's per-batch costs more often (CPU per record at 16 elements:
# 118 / 154 / 215 us on 2 / 3 / 4 instances), and on 4 the 2-core host is the limit. What a longer batch costs
# UC4 is correctness, not lag: its results climb one level per micro-batch, and those that arrive after the
# watermark passed their window are dropped in its state function. They are counted now (the late-records
# SLO's series; UC4 reports its own drops, which Spark's numRowsDroppedByWatermark misses), and they are not
# only at failing points. Re-measured 2026-11-24 at e10c1b8 (same commands): elements 9 on one instance pass
# (-17 [-68, +33] vs 36) with 104 readings dropped as late, 12 on two pass with 49, 16 on two FAIL this time
# (+2 568 [+1 328, +3 808], 16.6 s batches) with 1 392, 16 on three pass with 238; depth 4 on one passes with 9
# (-13 [-27, +1] vs 13), depth 6 FAILS on two (+1 777, 4 883 late, 14.0 s batches) and on three (+453
# [+219, +688], 8 576 late, 8.9 s batches) half-core instances on this host. So 16 elements is an edge between
# two and three instances, depth 6 between two and four, and a late-records bound of 0 would fail every point:
# no UC4 point with demand >= 3 is a gate until one holds still under gate_quality.py.
@pytest.mark.theodolite(UC4_DEPTH, loads=[4, 6], **{**GATE, "instance_cpu": 0.5, "cost_tolerance": "30%"})
def test_uc4_hierarchical_aggregation(theodolite_gate):
    theodolite_gate.check()
