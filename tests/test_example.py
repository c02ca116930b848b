"""The worked example (examples/clickstream): a job that is not one of Theodolite's use cases, with records
of its own shape, gated against its committed baseline -- as a user runs it, from its own directory."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_theodolite.store.results import read_series

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "clickstream"


def test_the_clickstream_gate_reaches_records_and_reports_a_verdict(tmp_path):
    """Which verdict a real measurement reaches depends on the host; that one was reached -- a pass, a
    regression, or "not comparable" where this host's speed is too far from the one the example's baseline was
    recorded on, never an error or a skip -- on the job's own records, and reported, does not."""
    example = tmp_path / "clickstream"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("theodolite-results", "__pycache__"))
    assert (example / "baselines" / "clickstream-users.json").exists(), "the example ships its baseline"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-k",
            "3000",
            "--theodolite-max-instances=2",
        ],
        cwd=example,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    # passed (0), failed with a regression (1), or not comparable with the shipped baseline (7): the exit code
    # 7 also means "could not measure", which the outcomes of the sub-experiments below rule out
    assert done.returncode in (0, 1, 7), output
    assert "1 passed" in output or "1 failed" in output, output
    if done.returncode == 7:
        assert "clickstream-users: NOT COMPARABLE" in output and "not comparable: load 3000: " in output, (
            output
        )
    assert (
        "clickstream-users: " in output and "theodolite: clickstream-users load=3000 instances=" in output
    ), output
    document = json.loads((example / "theodolite-results" / "expclickstream-users_results.json").read_text())
    assert document["sub_experiments"], document
    for sub in document["sub_experiments"]:
        assert sub["outcome"] in ("pass", "fail"), sub
        counters = sub["repetitions"][0]["counters"]
        # the job parsed the generator's click records: all of them valid
        assert counters["records_total"] > 1000 and counters["records_malformed"] == 0, counters
        # its windows are state: sampled with the lag, as Spark's state operators report it
        name = f"expclickstream-users_{sub['load']}_{sub['resources']}_state-rows_0.csv"
        state = example / "theodolite-results" / name
        assert state.exists(), sorted(p.name for p in state.parent.iterdir())
        assert max(read_series(state).values) > 0, state.read_text()[:500]
        # and its state operator's count of rows dropped as later than the watermark, one value per batch
        late = read_series(state.with_name(name.replace("state-rows", "late-rows")))
        assert len(late) > 1 and min(late.values) >= 0, late
        assert counters["records_dropped_late"] == sum(late.values), counters
