"""The public API (``from pytest_theodolite import ...``) and the module paths of release 0.1, which keep
importing for one release with a DeprecationWarning."""

import importlib
import subprocess
import sys

import pytest

import pytest_theodolite
from pytest_theodolite._compat import MOVED_MODULES, SPLIT_MODULES, new_name


def test_every_public_name_resolves_to_its_defining_module() -> None:
    for name in pytest_theodolite.__all__:
        value = getattr(pytest_theodolite, name)
        assert value is not None, name
    assert pytest_theodolite.Benchmark.__module__ == "pytest_theodolite.engine.benchmark"
    assert pytest_theodolite.Workload.__module__ == "theodolite_generator.workload"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Benchmrk'"):
        _ = pytest_theodolite.Benchmrk  # type: ignore[attr-defined]


def test_importing_the_package_imports_no_spark_kafka_client_or_docker() -> None:
    """The executors' Python workers import it (infra/spark/pyspark_daemon.py) where only pyspark's own
    dependencies may be installed. A fresh interpreter: the test session has long imported all of them."""
    code = (
        "import sys, pytest_theodolite, pytest_theodolite.infra.spark.pyspark_daemon; "
        "print(sorted({'pyspark', 'kafka', 'confluent_kafka', 'docker', 'testcontainers'} & set(sys.modules)))"
    )
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == "[]"


def test_loading_the_plugin_imports_kafka_python_without_its_deprecation_warnings() -> None:
    code = "import pytest_theodolite.plugin, pytest_theodolite.engine.monitor"
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("old", sorted(set(MOVED_MODULES) - set(SPLIT_MODULES)))
def test_old_module_paths_warn_and_are_the_new_modules(old: str) -> None:
    old_name = f"pytest_theodolite.{old}"
    sys.modules.pop(old_name, None)
    with pytest.warns(DeprecationWarning, match=f"{old_name} moved to {new_name(old_name)}"):
        module = importlib.import_module(old_name)
    target = importlib.import_module(f"pytest_theodolite.{MOVED_MODULES[old]}")
    assert module is target
    assert target.__spec__ is not None and target.__spec__.name == target.__name__


def test_a_submodule_of_a_moved_package_is_the_same_module() -> None:
    sys.modules.pop("pytest_theodolite.kafka.admin", None)
    with pytest.warns(DeprecationWarning):
        old = importlib.import_module("pytest_theodolite.kafka.admin")
    new = importlib.import_module("pytest_theodolite.infra.kafka.admin")
    assert old.KafkaCluster is new.KafkaCluster


def test_names_that_did_not_move_are_left_to_the_import_system() -> None:
    assert new_name("pytest_theodolite.plugin") is None
    assert new_name("pytest_theodolite.core.slo") is None
    assert new_name("generator.workload") is None


def test_the_report_module_of_old_is_a_package_that_forwards_its_names() -> None:
    from pytest_theodolite.report import summary

    with pytest.warns(DeprecationWarning, match="report.summary"):
        from pytest_theodolite.report import failure_table
    assert failure_table is summary.failure_table


#: names of release 0.1's modules whose code was split over several modules, one from each new home
SPLIT_NAMES = {
    "sides": {"SideProcess": "pull_request.sides", "spec_for": "pull_request.side_spec"},
    "compare": {
        "abba": "pull_request.paired",
        "CompareTarget": "pull_request.target",
        "PairedPoint": "pull_request.point",
        "PairedRead": "pull_request.paired_read",
        "PairedCapacities": "pull_request.capacities",
    },
    "slo": {"check_lag_trend": "core.slo", "SloSettings": "core.evaluation", "ols_slope": "core.estimators"},
    "baseline": {
        "load_baseline": "store.baseline",
        "Testbed": "store.testbed",
        "compare": "judge.comparison",
        "offered_note": "report.notes",
    },
    "gates": {
        "TheodoliteSession": "engine.session",
        "gate_spec": "engine.markers",
        "testbed": "engine.testbed",
        "calibration_note": "report.notes",
    },
    "results": {
        "read_results": "store.results",
        "RepetitionRecord": "core.records",
        "environment_info": "store.environment",
    },
    "runner": {
        "ExperimentRunner": "engine.runner",
        "ExperimentSettings": "engine.benchmark",
        "RunningJob": "engine.job",
    },
    "protocol": {
        "MeasurementProtocol": "core.protocol",
        "DIVERGENCE_BATCHES": "core.batch_trends",
        "MeasurementPlan": "core.measurement_plan",
    },
    "cost": {
        "check_cost": "core.cost",
        "blind_spot": "core.blind_spot",
        "blind_spot_warning": "report.notes",
    },
    "spark.cluster": {"SparkCluster": "infra.spark.cluster", "executor_addresses": "infra.spark.executors"},
}


@pytest.mark.parametrize("old", sorted(SPLIT_MODULES))
def test_an_old_module_whose_code_was_split_finds_each_name_in_its_new_home(old: str) -> None:
    old_name = f"pytest_theodolite.{old}"
    sys.modules.pop(old_name, None)
    with pytest.warns(DeprecationWarning, match=f"{old_name} moved to"):
        module = importlib.import_module(old_name)
    for name, home in SPLIT_NAMES[old].items():
        assert getattr(module, name) is getattr(importlib.import_module(f"pytest_theodolite.{home}"), name)
    with pytest.raises(AttributeError, match="no attribute 'never_there'"):
        _ = module.never_there


def plugin_private_attributes() -> set[str]:
    """Every private method and attribute the plugin's classes define (``def _x``, ``_x: T``, ``self._x = ...``)."""
    import ast
    from pathlib import Path

    names = set()
    for path in Path(pytest_theodolite.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_names_used(source: str, private_attributes: set[str]) -> list[str]:
    """The private names of the plugin a script reaches: imported (``from pytest_theodolite... import _x``) or
    read off an object other than ``self``/``cls`` where the plugin defines that private name (``obj._x``)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_theodolite"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr in private_attributes:
            if not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}):
                found.append(f"{ast.unparse(node.value)}.{node.attr}")
    return found


def test_the_research_scripts_use_only_public_names_of_the_plugin() -> None:
    """experiments/ is read as an example of the plugin's use: what it needs is public (or a documented
    internal module's public name), so that an internal change cannot silently break a script."""
    from pathlib import Path

    scripts = sorted((Path(__file__).parent.parent / "experiments").glob("*.py"))
    assert scripts
    private = plugin_private_attributes()
    assert (
        "_batches" in private and "_jsc" not in private
    )  # the protocol's own; pyspark's is not the plugin's
    reached = {s.name: names for s in scripts if (names := private_names_used(s.read_text(), private))}
    assert reached == {}


def test_the_private_name_check_sees_imports_and_attributes() -> None:
    source = (
        "from pytest_theodolite.engine.services import _prepare, public\n"
        "import sys\nsys._getframe()\nprotocol._batches\nself._ok\n"
    )
    used = private_names_used(source, {"_batches", "_ok"})
    assert used == ["pytest_theodolite.engine.services._prepare", "protocol._batches"]
