"""The module paths of release 0.1 (``pytest_theodolite.runner``, ``.baseline``, ...) keep importing, with a
DeprecationWarning, for one release: each old name is an alias of the module that now holds its code, or,
where that code was split over several modules, a module that finds each name in them."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

#: old module (below pytest_theodolite) -> where it lives now
MOVED_MODULES = {
    "baseline": "store.baseline",
    "calibration": "engine.calibration",
    "certainty": "core.certainty",
    "compare": "pull_request.paired",
    "cost": "core.cost",
    "demand_points": "judge.demand_points",
    "errors": "core.errors",
    "gates": "engine.session",
    "host": "store.host",
    "isolation": "infra.isolation",
    "kafka": "infra.kafka",
    "maven": "infra.maven",
    "metrics": "core.scalability",
    "monitor": "engine.monitor",
    "ports": "infra.ports",
    "process": "infra.process",
    "protocol": "core.protocol",
    "redaction": "core.redaction",
    "results": "store.results",
    "runner": "engine.runner",
    "search": "core.search",
    "services": "engine.services",
    "settings": "engine.settings",
    "shared": "infra.shared",
    "sides": "pull_request.sides",
    "slo": "core.slo",
    "spark": "infra.spark",
    "waiting": "infra.waiting",
    "worktree": "pull_request.worktree",
}
#: old modules whose names now live in more than the module above: where else to look, in order
SPLIT_MODULES = {
    "baseline": ("store.testbed", "judge.comparison", "core.outcomes", "report.notes"),
    "cost": ("core.blind_spot", "report.notes"),
    "gates": ("engine.markers", "engine.experiment", "engine.testbed", "report.progress", "report.notes"),
    "protocol": ("core.batch_trends", "core.measurement_plan", "core.outcomes"),
    "results": ("core.records", "store.environment"),
    "runner": ("engine.benchmark", "engine.job", "engine.recorder"),
    "slo": ("core.estimators", "core.evaluation", "core.outcomes"),
    "sides": ("pull_request.side_spec",),
    "compare": (
        "pull_request.experiment",
        "pull_request.target",
        "pull_request.point",
        "pull_request.paired_read",
        "pull_request.capacities",
    ),
    "spark.cluster": ("infra.spark.executors",),
}
PACKAGE = "pytest_theodolite"


def new_name(old: str) -> str | None:
    """The module that now holds `old` (a dotted name), or None where `old` did not move."""
    prefix = PACKAGE + "."
    if not old.startswith(prefix):
        return None
    head, _, tail = old[len(prefix) :].partition(".")
    moved = MOVED_MODULES.get(head)
    if moved is None:
        return None
    return prefix + moved + ("." + tail if tail else "")


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new}; import it from there, or the public names from {PACKAGE} (the old path goes "
        "in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )


class _AliasLoader(importlib.abc.Loader):
    """The old name is the new module itself."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.target_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(spec.name, self.target)
        module = importlib.import_module(self.target)
        self.target_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The target module ran at its own import; the import system set the alias's spec on it: undo that."""
        module.__spec__ = self.target_spec


class _SplitLoader(importlib.abc.Loader):
    """The old name is a module of its own that finds each name in the modules its code went to."""

    def __init__(self, targets: tuple[str, ...]) -> None:
        self.targets = targets

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(spec.name, " and ".join(self.targets))
        return ModuleType(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        targets = self.targets

        def find(name: str) -> object:
            for target in targets:
                value = getattr(importlib.import_module(target), name, _MISSING)
                if value is not _MISSING:
                    return value
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

        module.__getattr__ = find  # type: ignore[method-assign]


_MISSING = object()


class _OldPathFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        moved = new_name(fullname)
        if moved is None or fullname == moved:
            return None
        also = SPLIT_MODULES.get(fullname[len(PACKAGE) + 1 :], ())
        if also:
            targets = (moved, *(f"{PACKAGE}.{name}" for name in also))
            return importlib.util.spec_from_loader(fullname, _SplitLoader(targets))
        return importlib.util.spec_from_loader(fullname, _AliasLoader(moved))


def install_old_module_paths() -> None:
    if not any(isinstance(finder, _OldPathFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldPathFinder())
