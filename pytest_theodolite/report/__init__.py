"""What the gates show people: tables and summaries (summary.py), JUnit properties (junit.py), the
scalability plot (plot.py) and progress lines (progress.py)."""

from typing import Any

#: release 0.1's pytest_theodolite.report module is this package now: its names, for one release
_FORMER_MODULE = ("summary", "junit", "plot", "progress")


def __getattr__(name: str) -> Any:
    import importlib
    import warnings

    if not name.startswith("__"):
        for module_name in _FORMER_MODULE:
            module = importlib.import_module(f"pytest_theodolite.report.{module_name}")
            if hasattr(module, name):
                warnings.warn(
                    f"pytest_theodolite.report.{name} moved to pytest_theodolite.report.{module_name} (the old "
                    "path goes in the next release)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return getattr(module, name)
    raise AttributeError(f"module 'pytest_theodolite.report' has no attribute {name!r}")
