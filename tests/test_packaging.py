"""How the package installs into a user's project: every package of the plugin shipped, and the load generator
and the use-case jobs under names of their own, which a user's modules cannot shadow."""

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_of_the_plugin_is_shipped_and_the_folders_under_their_own_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "pytest_theodolite").rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk | {"theodolite_generator", "theodolite_spark_jobs"}
    assert setuptools["package-dir"] == {
        "theodolite_generator": "generator",
        "theodolite_spark_jobs": "spark_jobs",
    }


@pytest.mark.integration  # a whole pytest run
def test_a_users_own_generator_module_neither_shadows_the_plugin_nor_is_shadowed(pytester):
    """pytest puts a project's rootdir first on sys.path; a module of the user's named `generator` is theirs."""
    pytester.makepyfile(
        generator="WHOSE = 'the user'\n",
        test_own="import generator\n\ndef test_own():\n    assert generator.WHOSE == 'the user'\n",
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
