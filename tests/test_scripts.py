"""The benchmark scripts' own formatting, on scripted records (the scripts themselves need a broker)."""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.outcomes import Outcome
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.slo import GENERATOR_RATE, LAG_TREND, SloVerdict

SCRIPTS = Path(__file__).resolve().parents[1] / "experiments"


def load_script(name: str):
    if str(SCRIPTS) not in sys.path:  # the scripts import each other, as when run from experiments/
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def record(verdict: SloVerdict) -> SubExperimentRecord:
    return SubExperimentRecord.from_repetitions(
        2000, 1, 2000.0, [RepetitionRecord(0, (verdict,), protocol={"stop": "certain"})]
    )


def test_demand_grid_prints_an_errored_sub_experiment_without_a_slope():
    grid = load_script("demand_grid")
    errored = record(SloVerdict(LAG_TREND, Outcome.ERRORED, None, 20.0, "the query died"))
    invalid = record(SloVerdict(GENERATOR_RATE, Outcome.INVALID, 900.0, 1960.0, "fell short"))
    failed = record(SloVerdict(LAG_TREND, Outcome.FAIL, 1490.4, 20.0))
    assert errored.lag_trend_slope is None
    assert grid.cell(errored) == "none (errored)"
    assert grid.cell(invalid) == "none (invalid)"
    assert grid.cell(failed) == "+1490/s (fail)"
    assert grid.cell(None) == "not run"


def test_uc4_state_bench_times_two_folds_that_agree():
    bench = load_script("bench_uc4_state")
    batch = bench.readings(240)
    before, after = bench.ScriptedState(), bench.ScriptedState()
    [old] = bench.pandas_fold(bench.WINDOW, iter([batch]), before)
    [new] = bench.uc4.latest_per_child(bench.WINDOW, iter([batch]), after)
    # the old fold kept one group's children; the new state keeps every group of the call's bucket
    assert old.equals(new.astype(old.dtypes))
    assert json.loads(after.value[0]) == {bench.WINDOW[0]: json.loads(before.value[0])}


def test_bench_jobs_profiles_the_median_batch_from_progress_reports():
    bench = load_script("bench_jobs")

    def progress(total: int, add_batch: int, updates: list[int], commits: list[int]) -> dict:
        operators = [
            {"allUpdatesTimeMs": u, "commitTimeMs": c} for u, c in zip(updates, commits, strict=True)
        ]
        return {"durationMs": {"triggerExecution": total, "addBatch": add_batch}, "stateOperators": operators}

    measured = [
        progress(1000, 700, [100, 20], [30, 5]),
        progress(3000, 2900, [400, 0], [50, 0]),  # an outlier the median ignores
        progress(1200, 800, [120, 40], [25, 5]),
    ]
    profile = bench.batch_profile(measured)
    assert profile == bench.BatchProfile(
        batches=3, total=1200, add_batch=800, driver=300, state_update=160, state_commit=35
    )
    stateless = bench.batch_profile([{"durationMs": {"triggerExecution": 500, "addBatch": 400}}])
    assert (stateless.driver, stateless.state_update, stateless.state_commit) == (100, 0, 0)
    assert bench.batch_profile([]) is None


def test_gate_points_takes_a_use_case_or_a_benchmark_by_name():
    import argparse

    import pytest

    points = load_script("gate_points")
    parser = argparse.ArgumentParser()
    points.add_benchmark_argument(parser)
    # the use case's gate: the load is the number of elements per group, at a fixed depth of 3
    elements = points.chosen_benchmark(parser.parse_args(["--uc", "4"]))
    assert elements.name == "uc4-elements"
    assert elements.workload(12).keys == 12**3
    assert elements.workload(12).hierarchy.depth == 3
    # any benchmark by name: UC4 along the depth of its hierarchy, 4 elements per group
    depth = points.chosen_benchmark(parser.parse_args(["--benchmark", "uc4-depth"]))
    assert depth.name == "uc4-depth" and depth.workload(6).keys == 4**6
    for bad in ([], ["--uc", "4", "--benchmark", "uc4-elements"], ["--benchmark", "uc9"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


def test_gate_points_parses_its_arguments_and_explains_a_point(tmp_path):
    import argparse

    import pytest

    points = load_script("gate_points")
    assert points.parse_pair("4000:2") == (4000, 2)
    for bad in ("4000", "4000:0", "a:1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"4000:1|positive"):
            points.parse_pair(bad)
    assert points.parse_job_option("output_mode=append") == ("output_mode", "append")
    assert points.parse_job_option("extra_hash_rounds=7") == ("extra_hash_rounds", 7)
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        points.parse_job_option("append")

    verdict = SloVerdict(LAG_TREND, Outcome.PASS, -116.0, 200.0, low=-143.0, high=-89.0)
    counters = {"records_measured": 80_000, "instance_cpu_ms": 4_000, "records_total": 100_000}
    repetition = RepetitionRecord(
        0,
        (verdict,),
        {**counters, "records_written": 250_000, "records_dropped_late": 17},
        {"stop": "certain"},
    )
    point = SubExperimentRecord.from_repetitions(4000, 1, 4000.0, [repetition])
    # 50 us a record at 4 000 records/s is 0.2 core: 80 % of a quarter-core instance
    assert points.point_row(point, 0.25, 1.5, 42.0, (640.0, 652.0)) == (
        "| 4000 | 1 | pass | -116 [-143, -89] | 200 | certain | 50.0 | 80% | 2.50 | 1.50 | 640 -> 652 | 17 | 42 |"
    )
    unread = SubExperimentRecord.from_repetitions(
        4000, 1, 4000.0, [RepetitionRecord(0, (verdict,), protocol={"stop": "certain"})]
    )
    assert points.point_row(unread, 0.25, None, 42.0).endswith("| certain | - | - | - | - | - | - | 42 |")

    (tmp_path / "x_4000_1_batch-duration_0.csv").write_text(
        "labels,timestamp,value\n,1,1000\n,2,3000\n,3,2000\n"
    )
    assert points.median_batch_s(tmp_path, 4000, 1) == 2.0
    assert points.median_batch_s(tmp_path, 4000, 2) is None

    # windows opened and evicted: the state rises and falls, and peaks alike in both halves
    bounded = [0, 80, 170, 85, 150, 169, 85, 149, 170, 85]
    (tmp_path / "x_4000_1_state-rows_0.csv").write_text(
        "labels,timestamp,value\n" + "".join(f",{t},{v}\n" for t, v in enumerate(bounded))
    )
    assert points.state_rows_halves(tmp_path, 4000, 1) == (170, 170)
    (tmp_path / "x_8000_1_state-rows_0.csv").write_text(  # every reading kept: it grows
        "labels,timestamp,value\n" + "".join(f",{t},{100 * t}\n" for t in range(10))
    )
    assert points.state_rows_halves(tmp_path, 8000, 1) == (400, 900)
    assert points.state_rows_halves(tmp_path, 4000, 2) is None  # a stateless job


def test_pair_order_compares_the_second_side_of_each_pair_with_the_first(tmp_path):
    from pytest_theodolite.core.estimators import SlopeThreshold
    from pytest_theodolite.core.evaluation import SloSettings
    from pytest_theodolite.core.records import SERIES_LAG
    from pytest_theodolite.core.scalability import Metric
    from pytest_theodolite.store.results import ResultsWriter

    pairs = load_script("pair_order")
    passed = SloVerdict(LAG_TREND, Outcome.PASS, -10.0, 20.0)
    # (side, load, instances) -> (start of its lag series, instance CPU ms over 1 000 records)
    ran = {
        ("ref", 2000, 1): (1_000.0, 50),  # REF first at 2 000 ...
        ("change", 2000, 1): (1_100.0, 55),  # ... the change 10 % dearer, second
        ("change", 4000, 2): (1_200.0, 40),  # the change first at 4 000
        ("ref", 4000, 2): (1_300.0, 42),
        ("ref", 8000, 4): (1_400.0, 30),  # only REF passed at 8 000: no pair
    }
    for side in ("ref", "change"):
        writer = ResultsWriter(
            tmp_path / "run" / side,
            "uc1-keys",
            metric=Metric.DEMAND,
            slo_settings=SloSettings(warmup_s=0, lag_trend_threshold=SlopeThreshold(relative_to_load=0.01)),
            settings={"benchmark": "uc1-keys"},
            loads=[2000, 4000, 8000],
            resources=[1, 2, 4],
        )
        for (where, load, instances), (started, cpu_ms) in ran.items():
            if where != side:
                continue
            counters = {"instance_cpu_ms": cpu_ms, "records_measured": 1000}
            repetition = RepetitionRecord(0, (passed,), counters, {"stop": "certain"})
            writer.record_sub_experiment(
                SubExperimentRecord.from_repetitions(load, instances, float(load), [repetition])
            )
            with writer.open_series(load, instances, SERIES_LAG, 0) as lag:
                lag.append(started, 0)
    found = pairs.side_runs(tmp_path / "run")
    assert sorted(found) == [("uc1-keys", 2000, 1), ("uc1-keys", 4000, 2)]
    assert [r.side for r in found[("uc1-keys", 4000, 2)]] == ["change", "ref"]
    assert round(pairs.second_vs_first(found[("uc1-keys", 2000, 1)]), 3) == 0.1
    assert round(pairs.second_vs_first(found[("uc1-keys", 4000, 2)]), 3) == 0.05


def test_protocol_reference_runs_both_sides_of_each_stored_demand():
    from pytest_theodolite.store.baseline import Baseline
    from pytest_theodolite.store.testbed import Testbed

    reference = load_script("protocol_reference")
    testbed = Testbed(None, None, 0.25, "embedded", "standalone", None, "3.11")
    baseline = Baseline("uc1-keys", {4000: 1, 12000: 2, 20000: 4, 30000: None}, {}, testbed)
    # demand 1 has no count below it; "none" was never seen to pass, so it has no boundary to certify
    assert reference.boundary_pairs(1, baseline) == [
        (1, 4000, 1),
        (1, 12000, 1),
        (1, 12000, 2),
        (1, 20000, 3),
        (1, 20000, 4),
    ]
    # the committed baselines are read by the use case's benchmark name
    for uc in (1, 2, 3, 4):
        stored = reference.stored_boundaries(uc)
        assert stored and all(pair[0] == uc for pair in stored)
    assert reference.parse_use_case("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="not one of"):
        reference.parse_use_case("5")
    # a pair only one protocol ran has nothing to agree with; an uncertain gates' verdict lies in the band
    pair = reference.PairVerdicts
    ran = [
        pair("a", {"gates": "pass", "theodolite": "pass"}, gates_certain=True),
        pair("b", {"gates": "fail", "theodolite": "pass"}, gates_certain=False),
        pair("c", {"gates": "fail", "theodolite": "pass"}, gates_certain=True),
        pair("d", {"gates": "fail"}, gates_certain=True),
    ]
    assert reference.agreement(ran) == (
        "1 of 3 pairs reached the same verdict under both protocols; "
        "of the 2 whose gates' verdict was certain, 1"
    )


def test_protocol_reference_pairs_the_verdicts_it_recorded(tmp_path):
    from pytest_theodolite.core.estimators import SlopeThreshold
    from pytest_theodolite.core.evaluation import SloSettings
    from pytest_theodolite.core.scalability import Metric
    from pytest_theodolite.store.results import ResultsWriter

    reference = load_script("protocol_reference")
    ran = {  # experiment -> (outcome, certain)
        "gates-0": (Outcome.FAIL, False),
        "theodolite-0": (Outcome.PASS, False),
        "gates-1": (Outcome.PASS, True),
        "theodolite-1": (Outcome.PASS, False),
    }
    for experiment, (outcome, certain) in ran.items():
        writer = ResultsWriter(
            tmp_path,
            experiment,
            metric=Metric.DEMAND,
            slo_settings=SloSettings(warmup_s=0, lag_trend_threshold=SlopeThreshold(relative_to_load=0.05)),
            settings={"benchmark": "uc4-elements"},
            loads=[20],
            resources=[1],
        )
        verdict = SloVerdict(LAG_TREND, outcome, 1.0, 400.0)
        repetition = RepetitionRecord(0, (verdict,), protocol={"stop": "certain", "certain": certain})
        writer.record_sub_experiment(SubExperimentRecord.from_repetitions(20, 1, 8000.0, [repetition]))
    pairs = reference.recorded_pairs(tmp_path)
    assert [(p.label, p.outcomes, p.gates_certain) for p in pairs] == [
        ("uc4-elements 20@1", {"gates": "fail", "theodolite": "pass"}, False),
        ("uc4-elements 20@1", {"gates": "pass", "theodolite": "pass"}, True),
    ]
    assert reference.agreement(pairs).startswith("1 of 2 pairs")


def test_protocol_reference_pools_repetitions_by_point():
    reference = load_script("protocol_reference")
    pair = reference.PairVerdicts
    ran = [
        pair("p 20@1", {"gates": "fail", "theodolite": "pass"}, gates_certain=True),
        pair("p 20@1", {"gates": "fail", "theodolite": "fail"}, gates_certain=True),
        pair("q 26@3", {"gates": "pass", "theodolite": "fail"}, gates_certain=True),
        pair("q 26@3", {"gates": "pass", "theodolite": "fail"}, gates_certain=True),
        pair("r 12@1", {"gates": "pass", "theodolite": "pass"}, gates_certain=True),
        pair("r 12@1", {"gates": "fail", "theodolite": "pass"}, gates_certain=False),
        pair("s 8@1", {"gates": "pass"}, gates_certain=True),
    ]
    assert reference.by_point(ran) == [
        "p 20@1: gates FAIL 2; theodolite FAIL 1, PASS 1 -> Theodolite's own repetitions disagree: in the band",
        "q 26@3: gates PASS 2; theodolite FAIL 2 -> differ",
        "r 12@1: gates FAIL 1, PASS 1; theodolite PASS 2 -> agree in 1 of 2",
        "s 8@1: gates PASS 1 -> one protocol only",
    ]


def test_bench_jobs_counts_the_batches_after_the_first_and_after_the_warm_up():
    import pytest

    bench = load_script("bench_jobs")

    def progress(second: int, records: int) -> dict:
        return {
            "timestamp": f"2026-11-23T08:00:{second:02d}.000Z",
            "observedMetrics": {"records": {"total": records}},
        }

    reports = [progress(0, 0), progress(1, 50), *(progress(s, 50) for s in range(10, 40, 5)), progress(45, 0)]
    # the first batch with input (1 s) and those starting within 12 s of it (10 s) are cut; the idle one at
    # the end too
    assert [p["timestamp"][17:19] for p in bench.steady_batches(reports, 12.0)] == [
        "15",
        "20",
        "25",
        "30",
        "35",
    ]
    assert len(bench.steady_batches(reports, 0.0)) == 6  # without a warm-up cut, from the second batch on
    with pytest.raises(
        ValueError, match=r"3 micro-batches after the 20 s warm-up, fewer than 5: give more --records"
    ):
        bench.steady_batches(reports, 20.0)
    with pytest.raises(ValueError, match="no micro-batch read any input"):
        bench.steady_batches([progress(0, 0)], 0.0)


def test_backlog_cost_reads_each_batchs_cpu_from_the_samples_around_it():
    backlog = load_script("backlog_cost")
    from pytest_theodolite.core.capacity import MicroBatch

    samples = [(100.0, 10.0), (101.0, 11.0), (103.0, 13.0)]
    assert backlog.cpu_at(samples, 100.5) == 10.5
    assert backlog.cpu_at(samples, 102.0) == 12.0
    assert backlog.cpu_at(samples, 99.0) is None  # before the first sample: not guessed
    batches = [
        MicroBatch(1, 100.0, 1.0, 100_000),
        MicroBatch(2, 101.0, 2.0, 100_000),
        MicroBatch(3, 0, 1, 100_000),
    ]
    run = backlog.BacklogRun("ref", 0, batches, 4.0, 60.0, [1.0, 2.0, 9.0])
    assert run.records == 300_000
    assert run.cpu_us_per_record == 4.0 / 300_000 * 1e6
    assert run.median_batch_cpu_us == 20.0  # the stalled third batch left out by the median
    assert backlog.mean_interval([1.1]) == "+10.0%"
    assert backlog.mean_interval([1.1, 1.1, 1.1]) == "+10.0% [+10.0%, +10.0%]"


def test_paired_backlog_hands_each_side_the_run_options_and_reads_its_batches():
    paired = load_script("paired_backlog")
    # what the parent was given reaches each side's process unchanged
    given = argparse.Namespace(**{name: index + 0.5 for index, name in enumerate(paired.RUN_OPTIONS)})
    parser = argparse.ArgumentParser()
    for name in paired.RUN_OPTIONS:
        parser.add_argument(f"--{name.replace('_', '-')}", type=float)
    assert vars(parser.parse_args(paired.run_arguments(given))) == vars(given)
    # and becomes the engine's plan
    options = argparse.Namespace(
        batch_records=60_000, fill_factor=10.0, fill_s=30.0, warm=2, batches=6, max_s=200.0
    )
    plan = paired.backlog_plan(options)
    assert (plan.batch_records, plan.fill_factor, plan.fill_s) == (60_000, 10.0, 30.0)
    assert (plan.warm_batches, plan.batches, plan.max_read_s) == (2, 6, 200.0)
    # a side's batches as seconds per record: by wall time, by cycle where a next batch was seen, or by task CPU
    # where its event log had a figure
    run = {
        "batches": [[100.0, 2.0, 100_000], [102.0, 3.0, 120_000]],
        "task_cpu_s": [None, 6.0],
        "cycle_s": [2.5, None],
    }
    assert paired.per_record(run, "wall") == pytest.approx([2e-5, 2.5e-5])
    assert paired.per_record(run, "cycle") == pytest.approx([2.5e-5])
    assert paired.per_record(run, "task CPU") == pytest.approx([5e-5])


def test_own_job_quality_reads_each_sides_capacities_and_task_cpu(tmp_path):
    own_job = load_script("own_job_quality")

    def measurement(r, records_per_s, median_us):
        estimate = {"records_per_s": records_per_s, "low": records_per_s - 100, "high": records_per_s + 100}
        task_cpu = None if median_us is None else {"median_us": median_us}
        return {"instances": r, "estimate": estimate, "status": "certain", "task_cpu": task_cpu}

    for side, measured in {
        "ref": [measurement(1, 3000, 40.0), measurement(2, 5000, 60.0)],
        "change": [measurement(1, 2600, 46.0), measurement(2, 4500, None)],
    }.items():
        (tmp_path / side).mkdir()
        (tmp_path / side / "exp_results.json").write_text(json.dumps({"capacity_measurements": measured}))
    (tmp_path / "ref" / "notes.json").write_text("[]")  # not a results file: skipped
    found = own_job.capacities(tmp_path)
    assert sorted(found) == ["REF", "change"] and sorted(found["REF"]) == [1, 2]
    assert own_job.capacity_text(found["REF"][1]) == "3000 [2900, 3100], task CPU 40.00 us/record"
    assert own_job.capacity_text(found["change"][2]) == "4500 [4400, 4600]"
    assert own_job.capacity_text({"estimate": None, "status": "errored"}) == "errored"
    # only where both sides have a figure
    assert own_job.task_cpu_change(found) == pytest.approx({1: 46.0 / 40.0})

    # the paired backlog read, recomputed from both sides' batches and judged, or why there is none
    def side(task_cpu_s):
        return {
            "batches": [[k, 10.0 * k, 5.0, 100_000] for k in range(len(task_cpu_s))],
            "task_cpu_s": task_cpu_s,
        }

    dearer = [0.60 * r for r in (1.10, 1.15, 1.12, 1.09, 1.14, 1.13, 1.11, 1.12)]
    read = {"comparison": {}, "sides": {"ref": side([0.60] * 8), "change": side(dearer)}}
    (tmp_path / "clickstream_paired_cost.json").write_text(json.dumps(read))
    (tmp_path / "ref" / "other_paired_cost.json").write_text(json.dumps({"comparison": None, "problem": "x"}))
    assert own_job.paired_costs(tmp_path) == [
        "+12.0% batch by batch over 8 batches (medians 6.00 and 6.72 us, p 0.0039): COST REGRESSION at 7%",
        "not measured: x",
    ]
    same = {"comparison": {}, "sides": {"ref": side([0.60] * 8), "change": side([0.60] * 8)}}
    (tmp_path / "clickstream_paired_cost.json").write_text(json.dumps(same))
    assert own_job.paired_costs(tmp_path)[0].endswith("(medians 6.00 and 6.00 us, p 1): pass at 7%")

    # a read recorded with cycles is judged by them, as the gate judged it
    cycles = {side: {**document, "cycle_s": [5.0] * 8} for side, document in same["sides"].items()}
    cycles["change"]["cycle_s"] = [5.5] * 8
    (tmp_path / "clickstream_paired_cost.json").write_text(json.dumps({"comparison": {}, "sides": cycles}))
    assert own_job.paired_costs(tmp_path)[0].startswith(
        "+10.0% batch by batch over 8 batches (medians 50.00 and"
    )

    # a rise read twice is judged with its second read: here one within the tolerance, which passes it
    (tmp_path / "clickstream_paired_cost.json").write_text(json.dumps(read))
    again = {"comparison": {}, "sides": {"ref": side([0.60] * 8), "change": side([0.61] * 8)}}
    (tmp_path / "clickstream_paired_cost_confirmation.json").write_text(json.dumps(again))
    assert own_job.paired_costs(tmp_path)[0] == (
        "+12.0% batch by batch over 8 batches (medians 6.00 and 6.72 us, p 0.0039; read again +1.7% over 8): pass "
        "at 7%"
    )
    # and one beyond it too: both reads' pairs together decide
    again["sides"]["change"] = side([0.60 * r for r in (1.09, 1.11, 1.10, 1.08, 1.12, 1.10, 1.09, 1.11)])
    (tmp_path / "clickstream_paired_cost_confirmation.json").write_text(json.dumps(again))
    assert own_job.paired_costs(tmp_path)[0].endswith(
        "; read again +10.0% over 8, both together p 0.00021): COST REGRESSION at 7%"
    )


def test_own_job_quality_judges_recorded_runs_and_counts_the_flagged_of_each_kind(tmp_path, capsys):
    own_job = load_script("own_job_quality")

    def side(task_cpu_s):
        return {
            "batches": [[k, 10.0 * k, 5.0, 100_000] for k in range(len(task_cpu_s))],
            "task_cpu_s": task_cpu_s,
        }

    for run, change in (
        ("clean-1", [0.60] * 8),
        ("injected-1", [0.66, 0.70, 0.68, 0.69, 0.67, 0.71, 0.66, 0.70]),
    ):
        (tmp_path / run).mkdir()
        read = {"comparison": {}, "sides": {"ref": side([0.60] * 8), "change": side(change)}}
        (tmp_path / run / "clickstream_paired_cost.json").write_text(json.dumps(read))
    (tmp_path / "clean-1.log").write_text("not a run directory")
    own_job.judge_recorded([tmp_path])
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == ["clean: 0 of 1 flagged", "injected: 1 of 1 flagged"]
    assert lines[1].startswith(f"{tmp_path / 'injected-1'}: +14.2% batch by batch")
    own_job.judge_recorded([tmp_path], first=4)  # as a read of four batches a side would have judged
    lines = capsys.readouterr().out.splitlines()
    assert "over 4 batches" in lines[1] and lines[1].endswith("): not judged at 7%")
    assert lines[-1] == "injected: 0 of 1 flagged"


def scripted_rows(durations_s, rate=1000.0, span_s=300):
    """replay_protocol.samples rows, one a second, of a job whose batches take `durations_s` one after the
    other and commit all the lag there is: (t, lag, last finished id, its ms, its end, its records)."""
    ends, end = [], 0.0
    for duration in durations_s:
        end += duration
        ends.append(end)
    rows = []
    for t in range(span_s):
        done = [k for k, e in enumerate(ends) if e <= t]
        if not done:
            rows.append((float(t), rate * t, None, None, None, None))
            continue
        k = done[-1]
        rows.append(
            (float(t), rate * (t - ends[k]), k, 1000 * durations_s[k], ends[k], rate * durations_s[k])
        )
    return rows


def test_window_verdicts_counts_a_certain_verdict_the_long_run_contradicts():
    from pytest_theodolite.core.slo import BATCH_DURATION

    windows = load_script("window_verdicts")
    # a steady job whose batches sit above a 7.5 s bound for three batches, then below it for good; measured
    # as before c6d52da, when three batches could make a verdict certain
    three = MeasurementPlan(min_points=3)
    rows = scripted_rows([4.0, 4.0, 8.4, 8.4, 8.4] + [6.0] * 60)
    today = windows.replay_from(rows, 8.5, 50.0, 1000.0, 7.5, windows.Candidate(), three)
    assert (today.outcome, today.certain) == (Outcome.FAIL, True)  # two long batches decided it
    assert today.measured_s < 30
    wider = windows.replay_from(rows, 8.5, 50.0, 1000.0, 7.5, windows.Candidate(min_batches=6), three)
    assert (wider.outcome, wider.certain) == (Outcome.PASS, True)
    assert wider.measured_s > today.measured_s
    # so does a longer least measurement: by 40 s the settled batches outnumber the long ones
    longer = windows.replay_from(rows, 8.5, 50.0, 1000.0, 7.5, windows.Candidate(min_duration_s=40.0), three)
    assert (longer.outcome, longer.certain) == (Outcome.PASS, True)
    assert longer.measured_s >= 40
    assert str(windows.Candidate(min_duration_s=40.0)) == "confidence 0.95, >= 40 s measured"
    # and so does the plan since, four batches at least
    four = windows.replay_from(rows, 8.5, 50.0, 1000.0, 7.5, windows.Candidate())
    assert (four.outcome, four.certain) == (Outcome.PASS, True) and four.measured_s > today.measured_s
    # without the bound the lag alone decides: it is 0 after every commit
    lag_only = windows.replay_from(rows, 8.5, 50.0, 1000.0, None, windows.Candidate())
    assert (lag_only.outcome, lag_only.certain) == (Outcome.PASS, True)
    # the rows end before a replay begun late can stop: no verdict
    assert windows.replay_from(rows[:40], 8.5, 50.0, 1000.0, 7.5, windows.Candidate(min_batches=6)) is None
    assert windows.starts_in(rows, 60.0, 5.0, 120.0) == [60.0 + 5 * i for i in range(24)]

    tally = windows.Tally()
    tally.add([today, wider], Outcome.PASS)
    assert (tally.right, tally.wrong, tally.uncertain) == (1, 1, 0)
    failed_bound = SloVerdict(BATCH_DURATION, Outcome.FAIL, 9.0, 7.5)
    passed_lag = SloVerdict(LAG_TREND, Outcome.PASS, 1.0, 50.0)
    assert windows.reference_outcome([passed_lag, failed_bound]) is Outcome.FAIL
    assert windows.reference_outcome([passed_lag]) is Outcome.PASS
    assert windows.reference_outcome([SloVerdict(GENERATOR_RATE, Outcome.PASS, 1.0, 1.0)]) is None


def test_reference_tracking_compares_each_pair_of_rounds_speed_changes():
    tracking = load_script("reference_tracking")
    job = [1000.0, 800.0, 1000.0]
    # a reference that moves with the job by the same factors tracks it exactly, whatever its own scale
    assert tracking.pair_errors([50.0, 40.0, 50.0], job) == pytest.approx([0.0] * 6)
    # one that reads round 2 no slower than round 1 is 25 % off between them (1.0 / 0.8), both ways round
    errors = tracking.pair_errors([50.0, 50.0, 50.0], job)
    assert errors[0] == pytest.approx(0.8 - 1)  # rounds (1, 2): the reference says 1.0x, the job 1.25x
    assert errors[2] == pytest.approx(1.25 - 1)  # rounds (2, 1): 1.0x against 0.8x
    assert tracking.correlation([50.0, 40.0, 50.0], job) == pytest.approx(1.0)
    assert tracking.correlation([50.0, 50.0, 50.0], job) is None  # a flat reference tells nothing


def test_reference_tracking_summarises_recorded_rounds_and_skips_unsaturated_ones(
    tmp_path, capsys, monkeypatch
):
    tracking = load_script("reference_tracking")

    def round_(busy, sha, kafka, mu):
        uc1 = {"records_per_s": mu, "status": "certain", "busiest_share": 0.9}
        if mu is None:
            uc1 = {"records_per_s": None, "status": "certain, not saturated", "busiest_share": None}
        return {
            "busy": busy,
            "sha": {"rows_per_s": sha, "spread": 0.1, "cpu_us_per_row": 1.0},
            "kafka": {"rows_per_s": kafka, "spread": 0.05, "cpu_us_per_row": 40.0},
            "mu": {"1": uc1},
        }

    rounds = [round_(0, 300_000, 50_000, 1000.0), round_(1, 300_000, 40_000, 800.0), round_(0, 1, 1, None)]
    (tmp_path / tracking.ROUNDS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rounds))
    monkeypatch.setattr(sys, "argv", ["reference_tracking.py", "--read", str(tmp_path)])
    tracking.main()
    out = capsys.readouterr().out
    assert "| 2 | 1 | 300,000 (10%) | 40,000 (5%, 40.0) | 800 (90%) |" in out
    assert "| 3 | 0 | 1 (10%) | 1 (5%, 40.0) | certain, not saturated |" in out
    # the third round has no mu(1): two rounds, two ordered pairs; the Kafka reference moved as the job did
    assert "| UC1 | Kafka | 2 | 0.0% | 0.0% | 2 of 2 | - |" in out
    assert "| UC1 | SHA-512 | 2 | 22.5% | 25.0% | 0 of 2 | - |" in out


def test_paired_read_aa_picks_the_shipped_gates_by_use_case_and_names_a_wrong_one():
    paired_aa = load_script("paired_read_aa")
    chosen = paired_aa.gates(["uc2", "uc4"])
    assert sorted(chosen) == ["test_uc2_downsampling", "test_uc4_hierarchical_aggregation"]
    assert chosen["test_uc2_downsampling"].pytestmark[0].args[0].name == "uc2-keys"
    with pytest.raises(
        SystemExit, match=r"no gate in benchmarks/test_scalability_gates.py matches \['uc9'\]"
    ):
        paired_aa.gates(["uc9"])


def test_certified_runs_replays_both_procedures_on_scripted_demands():
    certified = load_script("certified_runs")
    baselines = {4000: 1, 12000: 2, 20000: 4}
    # the baseline's demands: 2 + 3 + 3 searched, 1 + 2 + 2 certified (REF's runs at each demand saved)
    assert certified.runs(baselines, baselines, certify=False) == 8
    assert certified.runs(baselines, baselines, certify=True) == 5
    # shifted guesses change nothing where every load meets its baseline ...
    assert certified.runs(baselines, baselines, certify=True, shift=True) == 5
    # ... and spare the walk down where the host needs half: 20 000 starts at 2, not at 4
    faster = {4000: 1, 12000: 1, 20000: 2}
    assert certified.runs(faster, baselines, certify=True) == 1 + 3 + 6
    assert certified.runs(faster, baselines, certify=True, shift=True) == 1 + 3 + 2
    assert certified.parse_demand("uc1-keys:4000=2,20000=none") == ("uc1-keys", {4000: 2, 20000: None})
    with pytest.raises(SystemExit, match="not BENCHMARK:LOAD=N"):
        certified.parse_demand("4000=2")


def paired_read_file(path: Path, change_per_record: list[float]) -> Path:
    """A recorded paired read: REF's batches at 20 us a record, the change's as given, 6 s apart."""
    records = 120_000

    def side(per_record: list[float]) -> dict:
        return {
            "batches": [[i, 1000.0 + 6 * i, 6.0, records] for i in range(len(per_record))],
            "task_cpu_s": [cost * records for cost in per_record],
        }

    ref = [20e-6] * len(change_per_record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {"load": 1, "sides": {"ref": side(ref), "change": side(change_per_record)}, "comparison": {}}
        )
    )
    return path


def test_paired_read_stop_ends_a_read_only_as_a_certain_pass(tmp_path):
    stop = load_script("paired_read_stop")
    level = [20e-6 * r for r in (1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.01, 1.00)]
    dearer = [20e-6 * r for r in (1.16, 1.14, 1.15, 1.13, 1.17, 1.15, 1.14, 1.16, 1.15, 1.13, 1.14, 1.16)]
    unchanged = stop.replay(paired_read_file(tmp_path / "aa" / "u_paired_cost.json", level), 0.07)
    # six ratios all below 1.07 give the signed-rank test's smallest p, 1/64: certain after the sixth pair
    assert (unchanged.verdict, unchanged.stopped_at, unchanged.pairs) == ("pass", 6, 12)
    assert unchanged.saved_s == pytest.approx(36.0)  # six batches of 6 s not read
    changed = stop.replay(paired_read_file(tmp_path / "ab" / "c_paired_cost.json", dearer), 0.07)
    assert (changed.verdict, changed.stopped_at, changed.saved_s) == ("regression", None, 0.0)
    # close to the tolerance, neither side of it is certain: the read goes on to its end
    near = [20e-6 * r for r in (1.05, 1.09, 1.06, 1.08, 1.07, 1.05, 1.09, 1.06, 1.08, 1.07, 1.06, 1.08)]
    assert stop.replay(paired_read_file(tmp_path / "n" / "n_paired_cost.json", near), 0.07).stopped_at is None
    # a read that measured nothing is left out
    (tmp_path / "x_paired_cost.json").write_text(json.dumps({"load": 1, "sides": {}, "comparison": None}))
    assert stop.replay(tmp_path / "x_paired_cost.json", 0.07) is None


def test_priming_backlog_counts_apart_the_repetitions_that_owed_their_priming():
    backlog = load_script("priming_backlog")

    def primed(primed_s, owed_s, certain, seconds, instances=4):
        return backlog.PrimedRepetition(
            "run", 20000, instances, primed_s, 30.0, owed_s, 30.0, "not-settled", certain, seconds
        )

    cold = primed(31.0, 30.3, False, 212.0)  # primed to the bound, nearly all of it still owed
    caught_up = primed(31.0, 12.0, True, 110.0)  # to the bound, but it had taken in most of it
    quick = primed(14.0, 13.9, True, 50.0)  # ended by its batches, before the bound
    assert [r.owed_its_priming(0.8) for r in (cold, caught_up, quick)] == [True, False, False]
    assert backlog.summary([cold, caught_up, quick, primed(9.0, 4.0, True, 60.0, instances=1)], 0.8) == [
        "| instances | owed its priming | repetitions | uncertain | mean seconds |",
        "|---:|---|---:|---:|---:|",
        "| 1 | no | 1 | 0 | 60 |",
        "| 4 | no | 2 | 0 | 80 |",
        "| 4 | yes | 1 | 1 | 212 |",
    ]


def protocol_with_batches(durations_s, stop=None):
    """A protocol whose batches under the CPU limit took `durations_s`, ended by `stop` (None: still running)."""
    from pytest_theodolite.core.protocol import MeasurementProtocol

    protocol = MeasurementProtocol(MeasurementPlan(), 50.0)
    protocol.stop, protocol._first_limited_batch = stop, 0
    protocol._batches = dict(enumerate(durations_s))
    return protocol


def test_replay_protocol_can_ask_a_not_settled_stop_for_more_batches_before_it_counts_as_certain():
    from pytest_theodolite.core.protocol import Stop

    replay = load_script("replay_protocol")

    # doubled, its rise not slowing
    five = protocol_with_batches([5.0, 9.0, 14.0, 20.0, 28.0], Stop.NOT_SETTLED)
    seven = protocol_with_batches([4.0, 5.0, 7.0, 9.0, 13.0, 18.0, 26.0], Stop.NOT_SETTLED)
    assert five.certain and seven.certain  # today's rule
    six = argparse.Namespace(batches=6)
    assert replay.not_settled_batches(five, six) is False
    assert replay.not_settled_batches(seven, six) is True
    assert replay.not_settled_batches(five, argparse.Namespace(batches=5)) is True
    # other stops keep today's certainty
    assert replay.not_settled_batches(protocol_with_batches([5.0, 9.0], Stop.CERTAIN), six) is True
    assert replay.not_settled_batches(protocol_with_batches([5.0, 9.0], Stop.MAX_DURATION), six) is False


def test_replay_protocol_rho_fit_tells_batches_past_every_fixed_point_from_a_rise_towards_one():
    replay = load_script("replay_protocol")
    limited = protocol_with_batches

    def batches(a, rho, first=3.0, count=7):
        durations = [first]
        for _ in range(count - 1):
            durations.append(a + rho * durations[-1])
        return durations

    five = argparse.Namespace(batches=5, confidence=0.95)
    # d(k+1) = a + rho d(k): with rho 1.2 the steps grow and no fixed point holds the batches
    assert replay.rho_fit(limited(batches(0.5, 1.2)), {}, five) is True
    # with rho 0.8 they rise towards a / (1 - rho) = 10 s by shrinking steps: a job that keeps up
    assert replay.rho_fit(limited(batches(2.0, 0.8)), {}, five) is False
    # falling batches (a backlog worked off), and too few batches for five pairs, say nothing
    assert replay.rho_fit(limited([8.0, 7.0, 6.0, 5.0, 4.5, 4.0]), {}, five) is False
    assert replay.rho_fit(limited(batches(0.5, 1.2, count=5)), {}, five) is False
    # jittery growth over three pairs: one degree of freedom leaves rho's bound far below 1
    three = argparse.Namespace(batches=3, confidence=0.95)
    assert replay.rho_fit(limited([3.0, 4.4, 5.1, 7.0]), {}, three) is False
