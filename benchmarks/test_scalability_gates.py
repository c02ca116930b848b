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

Loads (recorded on a 2-core CI machine, baselines/): UC1 4 000 / 12 000 / 20 000 -> 1 / 2 / 4 instances;
UC2 4 000 / 16 000 / 20 000 -> 1 / 2 / 2; UC3 2 000 -> 1; UC4 depth 4 / 6 -> 1 / 2. Loads at a
capacity edge flip between runs and were left out: UC2 12 000 measured 2 instances (one instance falling
behind) in one run and 1 (slope -16 [-515, 483] vs 600 records/s) in the next; UC1 28 000 at 4 instances
(-889 [-3007, 1228] vs 1 400) and UC2 28 000 at 2 (984 [658, 1310] vs 1 400) sat near the threshold.
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


# UC3's lag keeps a positive trend while its one-minute sliding windows fill, at every load above 2 000: one
# instance passed 8 000 records/s in 5 of 5 runs, but at 18-85 % of the threshold (72 [-128, 273] ...
# 342 [155, 530] vs 400 records/s), once only at the measurement bound, and it took 2.5-3 min -- a capacity
# edge, left out like UC2 12 000 (5 000 too: 134 [42, 225] vs 250). Loads that need more instances are the
# UC3/UC4 scaling issue's.
@pytest.mark.theodolite(UC3_KEYS, loads=[2000], **GATE)
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
@pytest.mark.theodolite(UC4_DEPTH, loads=[4, 6], **{**GATE, "instance_cpu": 0.5, "cost_tolerance": "30%"})
def test_uc4_hierarchical_aggregation(theodolite_gate):
    theodolite_gate.check()
