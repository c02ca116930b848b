"""docs/reference/ is made from the plugin's own tables: it must be up to date, and every option, ini key,
marker key, fixture and hook must have a text there."""

import ast
import re
from pathlib import Path

import pytest

from pytest_theodolite import reference
from pytest_theodolite.engine.markers import MARKER_HELP, MARKER_KEYWORDS
from pytest_theodolite.report.junit import JUNIT_PROPERTIES

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


#: variables the plugin sets only for the processes it starts (Spark's own), never read from the user's
SET_FOR_CHILD_PROCESSES = {
    "SPARK_LOG_DIR",
    "SPARK_WORKER_DIR",
    "SPARK_NO_DAEMONIZE",
    "SPARK_LOCAL_DIRS",
    "PYSPARK_DRIVER_PYTHON",
    "KAFKA_HEAP_OPTS",
}
#: names of that form that are no environment variable: a public constant listed in __all__
NOT_ENVIRONMENT = {"KAFKA_VERSION"}
ENVIRONMENT_FAMILIES = r"(THEODOLITE|GITHUB|PYSPARK|SPARK|HADOOP|YARN|JAVA|XDG|KAFKA)_[A-Z0-9_]*|PYTHONPATH"


def environment_names_in_the_source() -> set[str]:
    """Names of environment variables the package's code mentions (string constants and keyword arguments)."""
    package = Path(reference.__file__).parent
    found = set()
    for path in package.rglob("*.py"):
        if path.name == "reference.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.value if isinstance(node, ast.Constant) else getattr(node, "arg", None)
            if isinstance(name, str) and re.fullmatch(ENVIRONMENT_FAMILIES, name):
                found.add(name)
    return found


def test_the_environment_table_names_every_variable_the_code_reads_and_no_other() -> None:
    documented = {name for name, _ in reference.ENVIRONMENT_VARIABLES}
    in_source = environment_names_in_the_source()
    # a prefix the code reads variables by (THEODOLITE_KAFKA_<NAME>)
    prefixes = {name for name in in_source if name.endswith("_")}
    assert prefixes == {"THEODOLITE_KAFKA_", "KAFKA_"}, prefixes  # KAFKA_: the image's own broker settings
    assert "THEODOLITE_KAFKA_<NAME>" in documented
    undocumented = in_source - prefixes - SET_FOR_CHILD_PROCESSES - NOT_ENVIRONMENT - documented
    assert not undocumented, f"read by the code, missing from reference.ENVIRONMENT_VARIABLES: {undocumented}"
    stale = documented - {"THEODOLITE_KAFKA_<NAME>"} - in_source
    assert not stale, f"in reference.ENVIRONMENT_VARIABLES, read nowhere in the code: {stale}"
    page = reference.render()["options.md"]
    assert all(f"| `{name}` |" in page for name in documented)


def junit_names_in_the_source() -> set[str]:
    """JUnit property names the package's code writes or reads, with each f-string field as `<>`; a name ending
    in '.' is a prefix the code builds names from."""
    package = Path(reference.__file__).parent
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "<>" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            # (the reference table's own keys name their fields, <load>: not the code's names)
            if re.fullmatch(r"theodolite\.[a-z_<>.]+", text) and not re.search(r"<[a-z]", text):
                found.add(text)
    return found


def test_the_junit_reference_names_every_property_the_code_records_and_no_other() -> None:
    documented = {re.sub(r"<[a-z]+>", "<>", name) for name in JUNIT_PROPERTIES}
    # .low, .high, .lower_bound: the suffixes the meanings name
    documented |= {f"{name}.{suffix}" for name in documented for suffix in ("low", "high", "lower_bound")}
    in_source = junit_names_in_the_source()
    # a prefix: 'theodolite.demand.' of f"theodolite.demand.{load}", or a variable's 'theodolite.cpu_us_per_record'
    prefixes = {
        n
        for n in in_source
        if n.endswith(".") or ("<>" not in n and any(d.startswith(f"{n}.<>") for d in documented))
    }
    names = in_source - prefixes
    assert len(names) > 20, names  # the scan finds them
    assert not names - documented, f"recorded by the code, not in JUNIT_PROPERTIES: {names - documented}"
    for name in JUNIT_PROPERTIES:  # each documented name is made somewhere, whole or from a prefix
        pattern = re.sub(r"<[a-z]+>", "<>", name)
        assert pattern in names or any(pattern.startswith(prefix) for prefix in prefixes), name
    page = reference.render()["junit.md"]
    assert all(f"| `{name}` |" in page for name in JUNIT_PROPERTIES)


def test_the_readme_s_exit_codes_are_the_outcome_table_s() -> None:
    """README's short exit-code table names the codes docs/reference/outcomes.md (glue/outcomes.py) gives."""
    from pytest_theodolite.glue.outcomes import NO_BASELINE, VERDICT_OUTCOMES

    readme = (DOCS.parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = {int(code) for code in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert codes == {o.exit_code for o in [*VERDICT_OUTCOMES.values(), NO_BASELINE]}
    assert "docs/reference/outcomes.md" in section
