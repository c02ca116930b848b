"""The README is a guide a newcomer follows: its two commands come first, and its own-job walkthrough is code
that imports and declares a valid gate (the gate itself runs in tests/test_example.py's way, on a cluster)."""

import importlib.util
import re
import sys
from pathlib import Path

from pytest_theodolite import Workload
from pytest_theodolite.engine.markers import gate_spec

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks(text: str) -> dict[str, str]:
    """The README's Python blocks, by the file name in their first comment line (``# myjob.py``)."""
    blocks = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        first = block.splitlines()[0]
        if first.startswith("# ") and first.endswith(".py"):
            blocks[first[2:]] = block
    return blocks


def test_the_two_commands_come_first_and_the_guide_stays_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    head = "\n".join(lines[:8])
    assert "python3 -m pip install -e '.[test]' && python3 -m pytest benchmarks" in head
    assert "python3 -m pip install -e '.[test]' && python3 -m pytest tests" in head
    assert len(lines) <= 220


def test_the_own_job_walkthrough_declares_a_valid_gate(tmp_path: Path, monkeypatch) -> None:
    blocks = _python_blocks(README.read_text(encoding="utf-8"))
    assert set(blocks) >= {"myjob.py", "test_myjob_gate.py"}
    for name, code in blocks.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location("readme_gate", tmp_path / "test_myjob_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        gate = module.test_page_counts_scale
        marker = next(m for m in gate.pytestmark if m.name == "theodolite")
        declared = gate_spec(marker.args, marker.kwargs, {}, {})
        assert declared.benchmark.name == "page-counts"
        assert declared.settings.loads == (3000, 10000, 20000)
        # the workload checks its record factory on a first record before anything is produced
        assert isinstance(declared.benchmark.workload(2000), Workload)
        assert callable(sys.modules["myjob"].start_query)
    finally:
        sys.modules.pop("myjob", None)
