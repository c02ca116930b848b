"""What a command of this package reads from the user's project as pytest would: the ini file's keys, and a gate
test's ``theodolite`` marker -- so that ``points`` measures with the gate's own settings and the project's
cluster options, not with defaults of its own."""

from __future__ import annotations

import configparser
import importlib.util
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: where pytest looks for its ini keys in a rootdir, in its order: (file, section; None: the TOML table)
INI_FILES: tuple[tuple[str, str | None], ...] = (
    ("pytest.ini", "pytest"),
    (".pytest.ini", "pytest"),
    ("pyproject.toml", None),
    ("tox.ini", "pytest"),
    ("setup.cfg", "tool:pytest"),
)


class ProjectInputError(ValueError):
    """A gate or ini file of the project that cannot be read; the message says what and how to fix it."""


def read_ini(rootdir: Path) -> tuple[Path | None, dict[str, str]]:
    """(the ini file, its keys) of `rootdir` as pytest finds them: the first file of INI_FILES that has pytest's
    section (pytest.ini counts even without one). A list value is one entry a line, as pytest's linelist."""
    for name, section in INI_FILES:
        path = rootdir / name
        if not path.is_file():
            continue
        if section is None:
            try:
                table = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise ProjectInputError(f"{path} is not valid TOML: {exc}") from None
            options = table.get("tool", {}).get("pytest", {}).get("ini_options")
            if options is None:
                continue
            return path, {
                key: "\n".join(map(str, value)) if isinstance(value, list) else str(value)
                for key, value in options.items()
            }
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except configparser.Error as exc:
            raise ProjectInputError(f"{path} cannot be read: {exc}") from None
        if parser.has_section(section):
            return path, {key: value.strip() for key, value in parser.items(section)}
        if name == "pytest.ini":
            return path, {}
    return None, {}


@dataclass(frozen=True)
class GateMarker:
    """A gate test's ``@pytest.mark.theodolite(benchmark, **keys)``."""

    test: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def gate_marker(reference: str, rootdir: Path) -> GateMarker:
    """The ``theodolite`` marker of the gate test ``PATH::TEST`` (a path relative to `rootdir`), imported with
    `rootdir` first on the path, as pytest's rootdir makes a gate's own modules importable."""
    file_part, _, test_name = reference.partition("::")
    path = (rootdir / file_part).resolve()
    if not test_name or not path.is_file():
        raise ProjectInputError(
            f"expected a gate test as PATH::TEST, such as tests/test_gates.py::test_uc1, got {reference!r}"
            + ("" if path.is_file() else f" ({path} is not a file)")
        )
    for folder in (str(rootdir), str(path.parent)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"theodolite_gate_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ProjectInputError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ProjectInputError(f"{path} cannot be imported: {type(exc).__name__}: {exc}") from None
    test = getattr(module, test_name.split("[", 1)[0], None)
    if test is None:
        raise ProjectInputError(f"{path} has no test {test_name!r}")
    # a mark as pytest stores it on the function: objects with name, args and kwargs (no pytest import here)
    marks = [mark for mark in getattr(test, "pytestmark", []) if getattr(mark, "name", None) == "theodolite"]
    if not marks:
        raise ProjectInputError(f"{reference} has no @pytest.mark.theodolite(...) marker: name a gate test")
    return GateMarker(reference, tuple(marks[0].args), dict(marks[0].kwargs))
