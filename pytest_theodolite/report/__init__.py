"""What the gates show people: tables and summaries (summary.py), JUnit properties, the scalability plot."""

from typing import Any


def __getattr__(name: str) -> Any:
    # release 0.1's pytest_theodolite.report module is this package now: its names, for one release
    import importlib
    import warnings

    summary = importlib.import_module("pytest_theodolite.report.summary")
    if name.startswith("__") or not hasattr(summary, name):
        raise AttributeError(f"module 'pytest_theodolite.report' has no attribute {name!r}")
    warnings.warn(
        f"pytest_theodolite.report.{name} moved to pytest_theodolite.report.summary (the old path goes in the "
        "next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(summary, name)
