"""``python -m pytest_theodolite`` and the ``pytest-theodolite`` console script: one command line whose help lists
every subcommand."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from pytest_theodolite.__main__ import SUBCOMMANDS, main

ROOT = Path(__file__).resolve().parents[1]


def test_help_lists_every_subcommand_and_what_it_does(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name, (_, what) in SUBCOMMANDS.items():
        assert f"  {name}" in out and what in out, name
    assert set(SUBCOMMANDS) == {"analyse", "points", "quality", "history", "export", "reference"}


@pytest.mark.parametrize("argv", [["analyze", "results"], []], ids=["a typo", "nothing"])
def test_a_mistyped_or_missing_subcommand_names_every_one(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(f"  {name}" in err for name in SUBCOMMANDS), err
    if argv:
        assert "unknown subcommand 'analyze'" in err


def test_every_subcommand_runs_its_own_main(capsys):
    for name in SUBCOMMANDS:
        with pytest.raises(SystemExit) as exited:  # argparse's own --help
            main([name, "--help"])
        assert exited.value.code == 0, name
        assert "usage:" in capsys.readouterr().out, name


def test_the_console_script_is_the_same_command_line():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"pytest-theodolite": "pytest_theodolite.__main__:main"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest_theodolite", "--help"], capture_output=True, text=True, check=True
    )
    assert "pytest-theodolite SUBCOMMAND" in done.stdout
