"""``python -m pytest_theodolite points``: chosen points of any benchmark under the gates' protocol."""

import json
import subprocess
import sys
import textwrap

import pytest

from pytest_theodolite.cli import points
from pytest_theodolite.core.capacity import CapacityEstimate
from pytest_theodolite.core.outcomes import CapacityStatus, Outcome
from pytest_theodolite.core.records import RepetitionRecord, SubExperimentRecord
from pytest_theodolite.core.slo import LAG_TREND, SloVerdict
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement
from pytest_theodolite.engine.capacity_search import capacity_cost

GATE_MODULE = """
from theodolite_generator import Workload
from pytest_theodolite import Benchmark
from theodolite_spark_jobs import uc1

UC1 = Benchmark("uc1-points", uc1.start_query, lambda keys: Workload(keys=keys), input_partitions=2)
NOT_A_BENCHMARK = 42


def topics_only(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir):
    pass


OLD_JOB = Benchmark("old", topics_only, lambda keys: Workload(keys=keys))
"""

GATE_TEST = """
import pytest
from points_gate import UC1


@pytest.mark.theodolite(UC1, loads=[200, 400], resources=[1, 2], duration=8, max_duration=30, max_warmup=30,
                        threshold="20%")
def test_uc1(theodolite_gate):
    theodolite_gate.check()


def test_not_a_gate():
    pass
"""


@pytest.fixture
def gate_dir(tmp_path, monkeypatch):
    (tmp_path / "points_gate.py").write_text(GATE_MODULE)
    (tmp_path / "test_points_gate.py").write_text(GATE_TEST)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("points_gate", None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["points_gate", "--point", "100:1"], "expected MODULE:BENCHMARK"),
        (["no_such_module:UC1", "--point", "100:1"], "no_such_module cannot be imported from"),
        (["points_gate:UC9", "--point", "100:1"], "points_gate has no UC9"),
        (["points_gate:NOT_A_BENCHMARK", "--point", "100:1"], "is a int, not a pytest_theodolite.Benchmark"),
        (
            ["points_gate:UC1", "--point", "100:1", "--set", "colour=red"],
            "unknown theodolite marker argument",
        ),
        (["points_gate:UC1", "--point", "100:1", "--set", "threshold=fast"], "threshold 'fast' is neither"),
        (["points_gate:UC1", "--point", "100:1", "--set", "loads=[1]"], "--capacity INSTANCES, not --set"),
        (["points_gate:OLD_JOB", "--point", "100:1"], "cannot take kafka_options, max_offsets_per_trigger"),
        (["points_gate:UC1"], "nothing to measure: give --point LOAD:INSTANCES or --capacity INSTANCES"),
        (["points_gate:UC1", "--capacity", "1"], "--capacity needs --load LOAD"),
        (["test_points_gate.py::test_not_a_gate", "--point", "1:1"], "has no @pytest.mark.theodolite"),
        (["test_points_gate.py::test_nothing", "--point", "1:1"], "has no test 'test_nothing'"),
        (["no_such_file.py::test_uc1", "--point", "1:1"], "is not a file"),
        (
            ["points_gate:UC1", "--point", "100:2", "--theodolite-max-instances", "1"],
            "raise it or measure fewer",
        ),
        (["points_gate:UC1", "--point", "100:1", "--kafka", "nowhere"], "is not a Kafka provider"),
    ],
)
def test_bad_input_is_a_clear_error_before_anything_starts(gate_dir, argv, message, capsys):
    assert points.main(argv) == points.EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def plan(argv, rootdir):
    return points.plan_points(points._build_parser().parse_args(argv), rootdir)


def test_a_gate_test_gives_its_marker_overridden_by_the_ini_file_overridden_by_set(gate_dir):
    (gate_dir / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\ntheodolite_threshold = '10%'\ntheodolite_duration = '12'\n"
        "theodolite_spark_master = 'local-cluster'\ntheodolite_max_instances = '3'\n"
    )
    planned = plan(["test_points_gate.py::test_uc1", "--point", "300:1", "--set", "duration=9"], gate_dir)
    settings = planned.spec.settings
    assert planned.spec.benchmark.name == "uc1-points"
    assert settings.loads == (300,) and settings.resources == (1,)  # the points', not the marker's
    assert settings.plan is not None and settings.plan.max_warmup_s == 30  # the marker's
    assert settings.slo.lag_trend_threshold.relative_to_load == 0.10  # the ini file's over the marker's 20%
    assert settings.duration_s == 9  # --set over the ini file's
    assert planned.infra.spark_master == "local-cluster" and planned.infra.max_instances == 3
    assert planned.ini_file == gate_dir / "pyproject.toml"
    # the command line over the ini file, for the cluster too
    planned = plan(
        [
            "points_gate:UC1",
            "--point",
            "300:2",
            "--spark-master",
            "standalone",
            "--theodolite-instance-cpu",
            "0.5",
        ],
        gate_dir,
    )
    assert planned.infra.spark_master == "standalone" and planned.spec.settings.instance_cpu == 0.5


def test_without_an_ini_file_a_benchmark_gets_the_defaults_and_as_many_instances_as_its_points(gate_dir):
    planned = plan(["points_gate:UC1", "--point", "300:2", "--capacity", "3"], gate_dir)
    assert planned.ini_file is None
    assert planned.infra.kafka_provider == "embedded" and planned.infra.max_instances == 3


def test_pytest_ini_comes_before_pyproject_as_pytest_reads_them(tmp_path):
    from pytest_theodolite.cli.project import read_ini

    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\ntheodolite_kafka = 'external'\n")
    assert read_ini(tmp_path) == (tmp_path / "pyproject.toml", {"theodolite_kafka": "external"})
    (tmp_path / "pytest.ini").write_text("[pytest]\ntheodolite_max_instances = 2\n")
    assert read_ini(tmp_path) == (tmp_path / "pytest.ini", {"theodolite_max_instances": "2"})
    (tmp_path / "pytest.ini").unlink()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no pytest table: not pytest's file
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\ntheodolite_kafka_properties =\n  a=1\n  b=2\n")
    assert read_ini(tmp_path) == (tmp_path / "setup.cfg", {"theodolite_kafka_properties": "a=1\nb=2"})


def test_points_and_settings_are_parsed_as_the_marker_takes_them():
    assert points.parse_point("4000:2") == (4000, 2)
    assert points.parse_setting("instance_cpu=0.25") == ("instance_cpu", 0.25)
    assert points.parse_setting("threshold=5%") == ("threshold", "5%")
    assert points.parse_setting('spark_conf={"a": "1"}') == ("spark_conf", {"a": "1"})
    with pytest.raises(SystemExit):
        points._build_parser().parse_args(["m:B", "--point", "4000"])


def test_a_row_says_the_verdict_and_what_explains_it():
    verdict = SloVerdict(LAG_TREND, Outcome.FAIL, 420.0, 200.0, "", 300.0, 540.0)
    repetition = RepetitionRecord(0, (verdict,), protocol={"stop": "certain"})
    record = SubExperimentRecord.from_repetitions(4000, 2, 4000.0, [repetition])
    row = points.point_row(record, 0.25, 1.5, 61.2)
    assert row.startswith("| 4000 | 2 | fail | +420 [+300, +540] | 200 | certain | ")
    assert row.endswith(" | 1.50 | 61 |")


def test_the_median_batch_is_read_from_the_repetitions_a_row_shows(tmp_path):
    for repetition, durations in ((0, [1000, 2000, 3000]), (1, [8000, 9000])):
        rows = "".join(f"{{series=batch-duration}},{i},{d}\n" for i, d in enumerate(durations))
        path = tmp_path / f"exppoints_4000_2_batch-duration_{repetition}.csv"
        path.write_text("labels,timestamp,value\n" + rows)
    assert points.median_batch_s(tmp_path, 4000, 2, [0]) == 2.0
    assert points.median_batch_s(tmp_path, 4000, 2, [1]) == 8.5
    assert points.median_batch_s(tmp_path, 4000, 2) == 3.0  # all of them


def test_a_capacity_row_says_the_capacity_its_certainty_and_the_cost_at_it():
    estimate = CapacityEstimate(2, 8000.0, 7600.0, 8400.0, 6, 30.0, True, 16000, per_batch_s=0.42)
    measurement = CapacityMeasurement(2, 4000, 10000.0, 16000, estimate, CapacityStatus.CERTAIN)
    cost = capacity_cost(estimate, 0.25)
    assert cost is not None
    row = points.capacity_row(measurement, cost, 71.6)
    # 2 x 0.25 cores / 8 000 records/s = 62.5 us per record
    assert row == "| 2 | 8,000 [7,600, 8,400] records/s (6 batches) | certain | 62.5 | 0.42 | 72 |"
    broken = CapacityMeasurement(
        1, 4000, 10000.0, 16000, None, CapacityStatus.ERRORED, reason="the query died"
    )
    assert points.capacity_row(broken, None, 12.0) == "| 1 | - | errored: the query died | - | - | 12 |"


def test_capacity_counts_must_be_positive_whole_numbers():
    for bad in ("0", "two"):
        with pytest.raises(SystemExit):
            points._build_parser().parse_args(["m:B", "--capacity", bad])


class RepeatingRunner:
    """Runs a point as the runner does: the first run is repetition 0, each confirmation the next one."""

    def __init__(self) -> None:
        self.records: dict = {}

    def _record(self, load, instances, repetitions):
        record = SubExperimentRecord.from_repetitions(load, instances, float(load), repetitions)
        self.records[(load, instances)] = record
        return record

    def run_sub_experiment(self, load, instances):
        verdict = SloVerdict(LAG_TREND, Outcome.PASS, 0.0, 1.0)
        return self._record(load, instances, [RepetitionRecord(0, (verdict,))])

    def confirm_sub_experiment(self, load, instances):
        earlier = self.records[(load, instances)].repetitions
        verdict = SloVerdict(LAG_TREND, Outcome.FAIL if len(earlier) % 2 else Outcome.PASS, 0.0, 1.0)
        return self._record(load, instances, [*earlier, RepetitionRecord(len(earlier), (verdict,))])


def test_a_point_named_again_is_its_next_repetition_and_its_row_shows_that_run_alone():
    runner = RepeatingRunner()
    runs = [points.measure_point(runner, 200, 1) for _ in range(3)] + [points.measure_point(runner, 300, 1)]
    assert [[r.repetition for r in run.repetitions] for run in runs] == [[0], [1], [2], [0]]
    assert [run.outcome for run in runs] == [Outcome.PASS, Outcome.FAIL, Outcome.PASS, Outcome.PASS]
    assert [r.repetition for r in runner.records[(200, 1)].repetitions] == [0, 1, 2]  # all kept, combined


@pytest.mark.integration
@pytest.mark.theodolite_exclusive  # it measures: nothing may run beside it under pytest-xdist
def test_points_measures_and_reports_each_point(gate_dir, tmp_path):
    """Which verdict is reached depends on the host; that each point was measured, printed and its raw
    series kept, and that nothing is left running, does not. The gate's marker and the project's ini keys
    give the settings, as a pytest run of the project has them."""
    (gate_dir / "pytest.ini").write_text("[pytest]\ntheodolite_max_instances = 1\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_theodolite",
            "points",
            "test_points_gate.py::test_uc1",  # the gate's marker: duration 8, max_warmup 30, threshold 20%
            "--point",
            "200:1",
            "--capacity",
            "1",
            # keys enough to keep one instance busy: offered the point's 200, it took all, and was measured again
            # at higher rates twice (test_instances_that_took_all_they_were_offered_... covers that)
            "--load",
            "6000",
            "--set",
            "max_duration=20",
            "--results",
            str(tmp_path / "results"),
        ],
        cwd=gate_dir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"points: the ini keys of {gate_dir / 'pytest.ini'}" in done.stdout
    assert "theodolite: uc1-points load=200 instances=1: " in done.stdout
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| 200 | 1 | ")]
    assert row.split(" | ")[2] in {"pass", "fail", "invalid", "errored"}, textwrap.shorten(done.stdout, 2000)
    # its raw series kept (a point named again is its next repetition: test_a_point_named_again_...)
    assert list((tmp_path / "results").glob("*_200_1_lag-trend_0.csv"))
    assert "theodolite: uc1-points capacity of 1 instances: " in done.stdout
    assert "uc1-points: capacities, offered the keys of load 6000" in done.stdout
    (capacity,) = [line for line in done.stdout.splitlines() if line.startswith("| 1 | ")]
    assert capacity.split(" | ")[2].split(":")[0] in {"certain", "uncertain", "errored", "invalid"}, capacity
    recorded = json.loads((tmp_path / "results" / "exppoints_results.json").read_text())
    assert [m["instances"] for m in recorded["capacity_measurements"]][-1] == 1
