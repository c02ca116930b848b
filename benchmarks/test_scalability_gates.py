"""The scalability gates: each use case's demand function along Theodolite's load dimension, compared with
the baseline in baselines/<benchmark>.json.

Sized for a 2-core CI machine: every instance is limited to a quarter core (cgroups), so 1...4 instances are
told apart while broker, generator and driver keep a core. Each sub-experiment follows the gates' default
protocol (pytest_theodolite/core/protocol.py): the job is primed on the real load without the CPU limit (class
loading, code generation and JIT at a quarter core took ~100 s on a fresh CI machine and made verdicts follow
the host), the warm-up ends when the micro-batch durations stop falling (at most 90 s), and the measurement
runs from 20 s until the lag slope's 95 % interval lies on one side of the threshold (at most 120 s). One
SLO decides (UC3: two): the lag trend (slope of the lag sampled once per finished micro-batch) below 5 % of
the load.
A micro-batch duration bound (``max_batch_duration``) decides only UC3's gate, whose job runs on a 5 s trigger
and whose bound is that cadence (1.5 intervals); as a fixed bound for a job without a trigger it would let the
host's speed decide wherever a point's steady batch time sits near it.

Loads (recorded on a 2-core CI machine, baselines/): UC1 4 000 / 12 000 / 20 000 -> 1 / 2 / 4 instances;
UC2 4 000 / 16 000 / 20 000 -> 1 / 2 / 2; UC3 2 000 / 8 000 / 16 000 -> 1 / 2 / 4; UC4 12 / 20 / 24 elements
per group -> 1 / 2 / 3.
Loads at a capacity edge flip between runs and were left out: UC2 12 000 measured 2 instances (one instance
falling behind) in one run and 1 (slope -16 [-515, 483] vs 600 records/s) in the next; UC1 28 000 at 4
instances (-889 [-3007, 1228] vs 1 400) and UC2 28 000 at 2 (984 [658, 1310] vs 1 400) sat near the threshold.
"""

import pytest
from usecases import QUICK_WARMUP_EXECUTORS, UC1_KEYS, UC2_KEYS, UC3_KEYS, UC4_ELEMENTS

# cost_tolerance: the CPU per record at each load's demand may rise this much over the baseline's before a
# point fails even at the same demand (and only when its interval lies wholly above the baseline's). Set from
# the figure's run-to-run spread on one 2-core host (3 runs, experiments/gate_quality.py): UC1-UC3
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
# experiments/gate_points.py (2026-11-22): 8 000 on 1 instance 12.2 s batches at 98 % of its quota
# (there the lag trend failed too, +1 892 [+473, +3 311] vs 400; in the recording and the two clean gate runs
# only the bound did: 14.8 s, lag +71 ... +180), on 2 4.4 s (77 %); 16 000 on 2 12.1 s, on 3 10.0 s, on 4 6.5 s
# (76 % of the quota: the host's broker, generator and driver are the limit there; 5.2 s in the recording);
# 12 000 on 2 passed at 95 % of the quota with 7.2 s batches -- an edge, left out.
# cost_tolerance 30 %: on the 5 s trigger the CPU per record moves with how the batches fall against it; over the
# recording and two clean runs (experiments/cost_spread.py) 8 000 on 2 instances varied by a coefficient
# of variation of 10 % (46.7 ... 56.9 us, +22 %), 2 000 by 5 %, 16 000 by 0.5 %; 8 % flagged one of the clean
# runs (+13 %), 30 % none of the 18 leave-one-out pairs.
@pytest.mark.theodolite(
    UC3_KEYS, loads=[2000, 8000, 16000], **{**GATE, "max_batch_duration": 7.5, "cost_tolerance": "30%"}
)
def test_uc3_aggregation_by_time_attribute(theodolite_gate):
    theodolite_gate.check()


# UC4 along the method's hierarchy dimension "number of elements in groups" (benchmarks/usecases.py UC4_ELEMENTS:
# depth 3, `elements` members per group -> elements**3 sensors), on quarter-core instances like the others. Depth
# grows the load 4x a step, too coarse for points of demand 1, 2 and 3 on a 2-core testbed; elements 12 / 20 / 24
# are 1 728 / 8 000 / 13 824 records/s. Until 2026-11-25 UC4 did not scale over instances: its Python state
# function was called once per (group, window) and micro-batch, a fixed cost per batch that more instances (shorter
# batches) paid more often -- 16 elements needed 2-3 instances, and on 4 fell behind in one run of two. Keyed by
# buckets of groups (spark_jobs/uc4.py), measured with experiments/gate_points.py --benchmark uc4-elements
# --instance-cpu 0.25 (2026-11-25, a host at 0.68x UC1's baseline host): 12 on one instance passes (-19 [-118, +79]
# vs 86 records/s), 16 on one too (-44 [-267, +179] vs 205, 94 % of the quota); 20 falls behind on one (13 s
# batches) and passes on two (-156 [-661, +349] vs 400) and three; 22 passes on two (92 % of the quota) and three;
# 24 passes on three (+140 [-373, +653] vs 691, 7.7 s batches) and four (-201 [-1 063, +661], 4.2 s). Recorded
# (--theodolite-update-baselines): 24 passed on two as well (-664 [-909, -419]), so the gate's third load is 26
# (17 576 records/s): unsettled on two and three, passing on four (-878 [-2 572, +815] vs 879) -- near its
# threshold, like UC1's 20 000 on four. Two clean gate_quality.py -k uc4 runs: 26 -> 4, then 3 (on three +110
# [-413, +633] vs 879): an edge between three and four instances, whose baseline holds the upper one.
# What a longer micro-batch costs UC4 is correctness, not lag: results climb one level per batch, and those that
# arrive after the watermark passed their window are dropped (counted: the late-records series; 28-1 594 per
# sub-experiment above). The gate does not bound them (max_late_rate): a bound of 0 would fail most points.
@pytest.mark.theodolite(UC4_ELEMENTS, loads=[12, 20, 26], **{**GATE, "cost_tolerance": "30%"})
def test_uc4_hierarchical_aggregation(theodolite_gate):
    theodolite_gate.check()
