"""The GitHub Actions workflows docs/github-actions.md gives a user's repository are checked against the code:
valid YAML, the plugin's own cache directory cached, every pytest option they pass one the plugin has, the
user's requirements installed (never this repository), the base branch fetched in pull-request mode, and the
exit codes the doc explains the ones the plugin returns."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from pytest_theodolite.engine.settings import GATE_OPTIONS, OPTIONS
from pytest_theodolite.glue.options import COMMAND_LINE_ONLY
from pytest_theodolite.glue.outcomes import EXIT_NO_VERDICT
from pytest_theodolite.infra.maven import default_cache_dir

DOC = Path(__file__).resolve().parents[1] / "docs" / "github-actions.md"


def workflows() -> dict[str, dict]:
    """Each ```yaml block of the doc, by the file name its first line gives."""
    found = {}
    for block in re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S):
        name = block.splitlines()[0].removeprefix("# ").strip()
        found[name] = yaml.safe_load(block)
    return found


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def pytest_options(workflow: dict) -> list[str]:
    """The options of every `python -m pytest` a step runs (folded `>-` blocks are one line)."""
    options = []
    for step in steps(workflow):
        words = shlex.split(step.get("run", "").replace("${{ github.base_ref }}", "main"))
        if "pytest" in words:
            options += [w.split("=", 1)[0] for w in words[words.index("pytest") + 1 :] if w.startswith("--")]
    return options


def test_the_doc_has_a_stored_mode_and_a_pull_request_mode_workflow() -> None:
    assert sorted(workflows()) == [
        ".github/workflows/scalability-pr.yml",
        ".github/workflows/scalability.yml",
    ]


@pytest.mark.parametrize("name", sorted(workflows()))
def test_each_workflow_caches_the_plugins_cache_and_installs_the_users_requirements(
    name, monkeypatch
) -> None:
    workflow = workflows()[name]
    monkeypatch.delenv("THEODOLITE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/home/runner")
    [cache] = [step for step in steps(workflow) if step.get("uses", "").startswith("actions/cache@")]
    assert Path(cache["with"]["path"].replace("~", "/home/runner")) == default_cache_dir()
    runs = " ".join(step.get("run", "") for step in steps(workflow))
    assert "pip install -r requirements-dev.txt" in runs  # the user's requirements, with the plugin in them
    assert "-e ." not in runs.split("#")[0] and "[test]" not in runs  # not this repository's own install
    assert "python -m pytest benchmarks" in runs


@pytest.mark.parametrize("name", sorted(workflows()))
def test_every_pytest_option_a_workflow_passes_is_one_the_plugin_or_pytest_has(name) -> None:
    ours = (
        {flag for flag, *_ in OPTIONS}
        | {flag for flag, *_ in GATE_OPTIONS}
        | {f for f, *_ in COMMAND_LINE_ONLY}
    )
    options = pytest_options(workflows()[name])
    assert options, "no pytest command found"
    unknown = set(options) - ours - {"--junitxml"}
    assert not unknown, unknown


def test_pull_request_mode_fetches_the_base_branch_and_compares_with_it() -> None:
    workflow = workflows()[".github/workflows/scalability-pr.yml"]
    [checkout] = [step for step in steps(workflow) if step.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0  # a shallow clone has no base branch: the run refuses it
    assert "--theodolite-compare-ref" in pytest_options(workflow)
    assert "--theodolite-pr-comment" in pytest_options(workflow)


def test_the_exit_code_table_explains_the_codes_the_plugin_returns() -> None:
    text = DOC.read_text(encoding="utf-8")
    codes = {int(code) for code in re.findall(r"^\| (\d+) \|", text, re.M)}
    assert codes == {0, 1, EXIT_NO_VERDICT}
    assert re.search(rf"^\| {EXIT_NO_VERDICT} \| .*no stored\s+baseline", text, re.M)
