"""Capacity per instance count, measured directly, for the shipped gates' use cases; the demand at the gates'
loads derived from it, beside the demand the gates' baselines hold.

    python experiments/capacity_probe.py [--uc 1 2 3 4] [--batch-s 1] [--precision 0.05] [--certify] [--all-resources]

Each use case runs with its gate's settings (benchmarks/test_scalability_gates.py: instance CPU, Spark conf,
threshold, protocol). For r = 1, 2, ... the generator offers ``--probe-factor`` times the gate's highest load,
the job reads micro-batches of ``--batch-s`` seconds of the gate's highest load, and mu(r) is measured until its
interval is within ``--precision`` (engine/capacity_probe.py). Probing stops at the first r that takes the
highest gate load outside the guard band. ``--certify`` runs the gate's lag-trend sub-experiment at every
(load, r) the capacities cannot tell (within ``--guard`` of the load), as a gate would.

Prints per r: mu(r), its interval, batches counted, the phases' seconds; then per gate load the derived demand,
the certifications run, and the baseline's demand; and the wall time of it all.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
import test_scalability_gates as gates  # the shipped gates' markers

from pytest_theodolite.core.capacity import CapacityRule, derive_demand
from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.capacity_probe import measure_capacity
from pytest_theodolite.engine.capacity_search import CapacityPlan, CapacitySearch, offered_workload
from pytest_theodolite.engine.markers import gate_spec
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.store.baseline import load_baseline

GATES = {
    1: gates.test_uc1_database_storage,
    2: gates.test_uc2_downsampling,
    3: gates.test_uc3_aggregation_by_time_attribute,
    4: gates.test_uc4_hierarchical_aggregation,
}
BASELINES = Path(__file__).resolve().parents[1] / "baselines"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uc", type=int, nargs="+", choices=sorted(GATES), default=[1, 2, 3, 4])
    defaults = CapacityPlan()
    parser.add_argument("--batch-s", type=float, default=defaults.batch_s)
    parser.add_argument("--precision", type=float, default=defaults.rule.precision)
    parser.add_argument("--probe-factor", type=float, default=defaults.probe_factor)
    parser.add_argument("--guard", type=float, default=defaults.guard)
    parser.add_argument("--max-measure", type=float, default=defaults.max_measure_s)
    parser.add_argument("--certify", action="store_true")
    parser.add_argument(
        "--all-resources", action="store_true", help="probe every r, not only up to the top load"
    )
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()

    results = args.results or Path(tempfile.mkdtemp(prefix="theodolite-capacity-"))
    plan = CapacityPlan(
        probe_factor=args.probe_factor,
        batch_s=args.batch_s,
        guard=args.guard,
        rule=CapacityRule(precision=args.precision),
        max_measure_s=args.max_measure,
    )
    infra = TheodoliteSettings(max_instances=4)
    t_all = time.monotonic()
    with open_kafka(infra) as kafka, open_spark(infra) as spark:
        for uc in args.uc:
            mark = GATES[uc].pytestmark[0]
            spec = gate_spec(mark.args, mark.kwargs, {})
            benchmark, settings = spec.benchmark, spec.settings
            top = max(settings.loads)
            writer = new_writer(results, f"cap{uc}", benchmark, settings, Metric.CAPACITY, {})
            runner = ExperimentRunner(benchmark, settings, kafka, spark, writer)
            search = CapacitySearch(runner, plan)
            offered = offered_workload(benchmark.workload, top, plan.probe_factor)
            print(
                f"\n## {benchmark.name}: offered {offered.target_rate:,.0f} records/s (the keys of load {top}), "
                f"batches of {plan.batch_s:g} s of the highest load",
                flush=True,
            )
            t_uc = time.monotonic()
            if args.all_resources:
                probe = plan.probe_plan(benchmark.workload(top).target_rate)
                for r in settings.resources:
                    search.measurements[r] = measure_capacity(runner, r, top, probe, workload=offered)
            else:
                search.measure_capacities()
            probe_s = time.monotonic() - t_uc
            print(
                "| r | mu(r) records/s | interval | large / small batches: records/s (batches) | c0 s | status "
                "| setup / prime / measure / small / teardown s |"
            )
            print("|---|---|---|---|---|---|---|")
            for r, m in sorted(search.measurements.items()):
                phases = " / ".join(
                    f"{m.timings.get(k, 0):.0f}"
                    for k in ("setup_s", "prime_s", "measure_s", "measure_small_s", "teardown_s")
                )
                e = m.estimate
                if e is None:
                    print(f"| {r} | - | - | - | - | {m.status}: {m.reason} | {phases} |", flush=True)
                    continue
                interval = f"[{e.low:,.0f}, {e.high:,.0f}]" if e.saturated else "not saturated"
                sizes = " / ".join(
                    f"{p.records_per_s:,.0f} ({p.batches})" if p is not None else "-"
                    for p in m.phases.values()
                )
                c0 = "-" if e.per_batch_s is None else f"{e.per_batch_s:.2f}"
                print(
                    f"| {r} | {e.records_per_s:,.0f} | {interval} | {sizes} | {c0} | {m.status} | {phases} |"
                )
            baseline = load_baseline(BASELINES / f"{benchmark.name}.json", benchmark.name)
            print("\n| load | records/s | derived demand | lag-trend runs | baseline |")
            print("|---|---|---|---|---|", flush=True)
            for gate_load in settings.loads:
                rate = benchmark.workload(gate_load).target_rate
                stored = baseline.demand.get(gate_load) if baseline is not None else None
                if args.certify:
                    step, runs = search.demand(gate_load, runner.run_sub_experiment, stored)
                    shown = step.optimum if step.status == "measured" else step.status
                    ran = ", ".join(f"r={r.resources}: {r.outcome.value}" for r in runs) or "-"
                else:
                    derived = derive_demand(
                        gate_load,
                        rate,
                        search.capacities,
                        threshold_share=search.threshold_share,
                        guard=plan.guard,
                    )
                    shown = derived.resources if derived.decided else f"to certify at r={derived.to_certify}"
                    ran = "-"
                print(f"| {gate_load} | {rate:,.0f} | {shown} | {ran} | {stored} |", flush=True)
            print(f"\nprobes {probe_s:.0f} s, with certification {time.monotonic() - t_uc:.0f} s", flush=True)
    print(f"\nall: {time.monotonic() - t_all:.0f} s; raw results: {results}")


if __name__ == "__main__":
    main()
