"""docs/reference/, made from the tables the plugin itself uses (options, ini keys, marker keys) and from its
fixtures' and hooks' docstrings: ``python -m pytest_theodolite reference --write docs/reference``.

A test compares the committed files with what this renders, so an option added without its help text, or
docs left behind by a change, fail the suite.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_theodolite import hookspec, plugin
from pytest_theodolite.engine.markers import GATE_DEFAULTS, MARKER_HELP
from pytest_theodolite.engine.settings import GATE_OPTIONS, OPTIONS
from pytest_theodolite.glue.options import COMMAND_LINE_ONLY, EXCLUSIVE_MARKER, INI_ONLY
from pytest_theodolite.glue.outcomes import EXIT_NO_VERDICT, NO_BASELINE, VERDICT_OUTCOMES
from pytest_theodolite.report.junit import JUNIT_PROPERTIES

GENERATED = "<!-- made by `python -m pytest_theodolite reference --write docs/reference`; do not edit -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _code(value: Any) -> str:
    return f"`{value}`" if value not in ("", None) else ""


#: every environment variable of the user's the plugin reads (tests/test_reference_docs.py finds each one the
#: package names in its source here): (name, meaning)
ENVIRONMENT_VARIABLES: list[tuple[str, str]] = [
    ("THEODOLITE_KAFKA_BOOTSTRAP", "the external cluster's address, where `--kafka-bootstrap` is not given"),
    (
        "THEODOLITE_KAFKA_<NAME>",
        "the client property `<name>` of an external cluster, e.g. `THEODOLITE_KAFKA_SASL_PASSWORD` sets "
        "`sasl.password`: secrets belong here, never printed or written",
    ),
    (
        "THEODOLITE_CACHE_DIR",
        "where Maven-resolved jars, the Kafka image's files and testbed calibrations are kept, where "
        "`--theodolite-cache-dir` is not given (default: `$XDG_CACHE_HOME/pytest-theodolite`)",
    ),
    ("XDG_CACHE_HOME", "the cache directory's parent (default: `~/.cache`)"),
    (
        "JAVA_HOME",
        "the JDK (17 or newer) the broker, Spark's master, workers and executors run on (default: `java` on "
        "`PATH`)",
    ),
    (
        "PYSPARK_PYTHON",
        "the executors' Python; where unset, the executors of a cluster the plugin starts run the interpreter "
        "that runs pytest, and on a cluster it reaches their Python is checked against it at setup",
    ),
    (
        "SPARK_HOME",
        "set for the master, workers and executors the plugin starts (the installed pyspark); where it names "
        "another Spark, the executors' Python workers keep its archives off their path",
    ),
    (
        "PYTHONPATH",
        "kept on the executors' path after the folders the job and the generator were imported from; in "
        "pull-request mode REF's tree comes first on its side",
    ),
    (
        "SPARK_LOCAL_IP",
        "the address the driver binds to on a cluster started here (default: `127.0.0.1`, which a sandboxed "
        "CI machine always routes)",
    ),
    (
        "SPARK_REMOTE",
        "refused when a session starts (as `SPARK_CONNECT_MODE_ENABLED`, `SPARK_API_MODE=connect`, and "
        "`spark.remote` or `spark.api.mode=connect` in a Spark setting): a Spark Connect client cannot choose how "
        "many executors run its queries",
    ),
    ("SPARK_CONNECT_MODE_ENABLED", "refused, see `SPARK_REMOTE`"),
    ("SPARK_API_MODE", "`connect` is refused, see `SPARK_REMOTE`"),
    ("HADOOP_CONF_DIR", "`--spark-master yarn`: the cluster's configuration (or `YARN_CONF_DIR`)"),
    (
        "YARN_CONF_DIR",
        "`--spark-master yarn`: the cluster's configuration, where `HADOOP_CONF_DIR` is not set",
    ),
    (
        "THEODOLITE_DEBIAN_MIRROR",
        "the Debian mirror the Kafka image built for `--kafka testcontainers` installs from (default: the one "
        "apt uses)",
    ),
    ("GITHUB_STEP_SUMMARY", "where set, the gates' Markdown summary is appended to that file"),
    (
        "THEODOLITE_RESULTS_URL",
        "the link to the raw results in the `--theodolite-pr-comment` file (default: the GitHub Actions run, from "
        "`GITHUB_SERVER_URL`, `GITHUB_REPOSITORY` and `GITHUB_RUN_ID`)",
    ),
    (
        "GITHUB_SERVER_URL",
        "with `GITHUB_REPOSITORY` and `GITHUB_RUN_ID`: the default `THEODOLITE_RESULTS_URL`",
    ),
    ("GITHUB_REPOSITORY", "see `GITHUB_SERVER_URL`"),
    ("GITHUB_RUN_ID", "see `GITHUB_SERVER_URL`"),
]


def options_page() -> str:
    lines = [
        GENERATED,
        "# Options and ini keys",
        "",
        "Every option can also be set in `[tool.pytest.ini_options]` (or `pytest.ini`) under its ini key; the",
        "command line wins over the ini file, the ini file over the default.",
        "",
        "## Where Kafka and Spark come from, and where results go",
        "",
        "| option | ini key | default | meaning |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{flag}` | `{ini}` | {_code(default)} | {_cell(text)} |" for flag, ini, default, text in OPTIONS
    ]
    lines += [
        "",
        "## Gate settings",
        "",
        "These override the `theodolite` marker's value for every gate (docs/reference/markers.md).",
        "",
        "| option | ini key | default | meaning |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{flag}` | `theodolite_{key}` | {_code(GATE_DEFAULTS[key])} | {_cell(text)} |"
        for flag, key, text in GATE_OPTIONS
    ]
    lines += ["", "## Command line only", "", "| option | meaning |", "|---|---|"]
    lines += [f"| `{flag}` | {_cell(text)} |" for flag, _, text in COMMAND_LINE_ONLY]
    lines += ["", "## Ini file only", "", "| ini key | meaning |", "|---|---|"]
    lines += [f"| `{key}` | {_cell(text)} |" for key, text in INI_ONLY]
    lines += ["", "## Environment", "", "| variable | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {_cell(text)} |" for name, text in ENVIRONMENT_VARIABLES]
    return "\n".join(lines) + "\n"


def markers_page() -> str:
    lines = [
        GENERATED,
        "# Markers",
        "",
        "## `@pytest.mark.theodolite(benchmark, *, loads, ...)`",
        "",
        "A scalability gate: a test with this marker that uses the `theodolite_gate` fixture runs once per load.",
        "`benchmark` is a `pytest_theodolite.Benchmark`; every key below is optional but `loads`.",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
    ]
    for key, text in MARKER_HELP.items():
        default = "required" if key == "loads" else _code(repr(GATE_DEFAULTS[key]))
        lines.append(f"| `{key}` | {default} | {_cell(text)} |")
    name, _, text = EXCLUSIVE_MARKER.partition(":")
    lines += [
        "",
        f"## `@pytest.mark.{name}`",
        "",
        _cell(text.strip())[0].upper() + _cell(text.strip())[1:] + ".",
    ]
    return "\n".join(lines) + "\n"


def _fixture_scope(value: Any) -> str | None:
    marker = getattr(value, "_fixture_function_marker", None) or getattr(
        value, "_pytestfixturefunction", None
    )
    return None if marker is None else str(marker.scope)


def fixtures_page(module: ModuleType = plugin) -> str:
    lines = [GENERATED, "# Fixtures", "", "| fixture | scope | what it gives |", "|---|---|---|"]
    for name, value in vars(module).items():
        scope = _fixture_scope(value)
        if scope is not None:
            lines.append(f"| `{name}` | {scope} | {_cell(inspect.getdoc(value) or '')} |")
    return "\n".join(lines) + "\n"


def hooks_page(module: ModuleType = hookspec) -> str:
    lines = [
        GENERATED,
        "# Hooks",
        "",
        "Implement them in a `conftest.py` or a plugin of your own.",
    ]
    for name, value in vars(module).items():
        if name.startswith("pytest_") and inspect.isfunction(value):
            signature = inspect.signature(value)
            parameters = ", ".join(f"{p.name}: {p.annotation}" for p in signature.parameters.values())
            heading = f"{name}({parameters}) -> {signature.return_annotation}"
            lines += ["", f"## `{heading}`", "", inspect.getdoc(value) or ""]
    return "\n".join(lines) + "\n"


def junit_page() -> str:
    lines = [
        GENERATED,
        "# JUnit properties",
        "",
        "With `--junitxml`, each gate point's test case carries these properties (CI test reports show them;",
        "`<load>` is a gate load in records/s, `<r>` an instance count).",
        "",
        "| property | value |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {_cell(text)} |" for name, text in JUNIT_PROPERTIES.items()]
    return "\n".join(lines) + "\n"


def outcomes_page() -> str:
    lines = [
        GENERATED,
        "# Outcomes and exit codes",
        "",
        "How each gate point ends, as a pytest test and in the run's exit code. The run exits 1 where any point",
        f"regressed (or any other test failed); else {EXIT_NO_VERDICT} where any point reached no verdict; else 0.",
        "pytest's own codes (2-5: interrupted, usage error, ...) keep their meaning.",
        "",
        "| outcome | what happened | test | exit code | what to do |",
        "|---|---|---|---|---|",
    ]
    rows = [(verdict.label, outcome) for verdict, outcome in VERDICT_OUTCOMES.items()]
    rows.append(("NO BASELINE", NO_BASELINE))
    lines += [
        f"| {label} | {_cell(o.happened)} | {o.test.value} | {o.exit_code} | {_cell(o.what_to_do)} |"
        for label, o in rows
    ]
    return "\n".join(lines) + "\n"


PAGES = {
    "options.md": options_page,
    "outcomes.md": outcomes_page,
    "junit.md": junit_page,
    "markers.md": markers_page,
    "fixtures.md": fixtures_page,
    "hooks.md": hooks_page,
}


def render() -> dict[str, str]:
    return {name: page() for name, page in PAGES.items()}


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
