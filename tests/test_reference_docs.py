"""docs/reference/ is made from the plugin's own tables: it must be up to date, and every option, ini key,
marker key, fixture and hook must have a text there."""

import re
from pathlib import Path

import pytest

from pytest_theodolite import reference
from pytest_theodolite.engine.markers import MARKER_HELP, MARKER_KEYWORDS

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reference"


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_the_committed_reference_is_what_the_tables_make(name: str) -> None:
    committed = (DOCS / name).read_text(encoding="utf-8")
    assert committed == reference.render()[name], (
        f"docs/reference/{name} is out of date: run python -m pytest_theodolite reference --write docs/reference"
    )


def test_every_option_and_ini_key_pytest_knows_is_in_the_reference(pytester: pytest.Pytester) -> None:
    """What ``pytest --help`` lists for the plugin -- every flag of its group, every ini key -- is documented."""
    result = pytester.runpytest("--help")  # the plugin is installed: its entry point loads it
    text = result.stdout.str()
    group = text.split("Theodolite scalability benchmarks:", 1)[1].split("\n\n", 1)[0]
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", group))
    ini_keys = set(re.findall(r"^  (theodolite_[a-z_]+)", text, re.M))
    assert "--kafka" in flags and "--theodolite-update-baselines" in flags
    assert "theodolite_kafka_properties" in ini_keys
    page = reference.options_page()
    for flag in sorted(flags):
        assert f"`{flag}`" in page, f"{flag} is not in docs/reference/options.md"
    for key in sorted(ini_keys):
        assert f"`{key}`" in page, f"ini key {key} is not in docs/reference/options.md"


def test_every_marker_key_has_a_text() -> None:
    assert set(MARKER_HELP) == set(MARKER_KEYWORDS)
    page = reference.markers_page()
    for key, text in MARKER_HELP.items():
        assert text.strip() and f"| `{key}` |" in page


def test_every_fixture_and_hook_is_documented() -> None:
    fixtures = reference.fixtures_page()
    rows = [line for line in fixtures.splitlines() if line.startswith("| `")]
    assert len(rows) >= 7
    for row in rows:
        assert not row.rstrip().endswith("|  |"), f"a fixture without a docstring: {row}"
    hooks = reference.hooks_page()
    assert "pytest_theodolite_sub_experiment(" in hooks and "pytest_theodolite_testbed(" in hooks
