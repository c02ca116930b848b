"""A cluster started for a session starts as many workers as its gates ask for -- the most instances of the gate
points left after -k and -m, two at least in pull-request mode -- up to --theodolite-max-instances: each worker is
a JVM that costs the gates' host memory and start-up time."""

import pytest

GATES = """
import pytest
from theodolite_generator import Workload
from pytest_theodolite import Benchmark

def job(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir, **options):
    pass

SMALL = Benchmark("small", job, lambda keys: Workload(keys=keys))
LARGE = Benchmark("large", job, lambda keys: Workload(keys=keys))

@pytest.mark.theodolite(SMALL, loads=[100], resources=[1, 2])
def test_small(theodolite_gate):
    pass

@pytest.mark.theodolite(LARGE, loads=[100], resources=[1, 3])
def test_large(theodolite_gate):
    pass

def test_not_a_gate():
    pass
"""

CONFTEST = """
import pytest
from pytest_theodolite.plugin import STATE_KEY

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    print("instances needed:", session.config.stash[STATE_KEY].instances_needed)
"""


@pytest.mark.parametrize(
    ("args", "needed"),
    [
        pytest.param([], "3", id="the most of any gate"),
        pytest.param(["-k", "small"], "2", id="only the gates left after -k"),
        pytest.param(["-k", "not_a_gate"], "None", id="no gate: the settings' maximum"),
        pytest.param(["--theodolite-max-instances=2"], "2", id="never above the maximum"),
    ],
)
def test_the_workers_started_are_the_most_instances_the_run_gates_ask_for(pytester, args, needed) -> None:
    pytester.makepyfile(test_gates=GATES)
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-s", *args)
    result.stdout.fnmatch_lines([f"instances needed: {needed}"])


def test_pull_request_mode_needs_two_for_its_paired_read(pytester) -> None:
    from pytest_theodolite.engine.settings import TheodoliteSettings
    from pytest_theodolite.glue.gate import GATE_POINT_KEY, instances_needed

    # a module name of its own: collected in this process, where tests/test_gates.py is imported already
    pytester.makepyfile(test_one_instance_gates=GATES.replace("resources=[1, 3]", "resources=[1]"))
    collected, _ = pytester.inline_genitems()
    items = [item for item in collected if "large" in item.nodeid]
    for item in items:  # as mark_gate_points marks them
        item.stash[GATE_POINT_KEY] = "load=" in item.nodeid
    assert instances_needed(items, TheodoliteSettings()) == 1  # one gate of one instance
    assert (
        instances_needed(items, TheodoliteSettings(compare_ref="main")) == 2
    )  # a side each in the paired read
