"""What a side of pull-request mode is given (`SideSpec`, plain picklable data) and where it imports its job from:
the job by module and name (`job_reference`), and the place in REF's worktree that matches where this process
imported the working tree's version (`side_roots`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_theodolite.core.errors import TheodoliteSetupError
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.infra.kafka.admin import KafkaCluster
from pytest_theodolite.infra.spark.cluster import SparkCluster
from theodolite_generator import Workload


class SideError(TheodoliteSetupError):
    """A side's driver process could not start its job, or died."""


def job_reference(benchmark: Benchmark) -> tuple[str, str]:
    """(module, qualified name) of the benchmark's job function: what a side imports from its own tree."""
    job = benchmark.start_query
    module, name = getattr(job, "__module__", None), getattr(job, "__qualname__", None)
    if not module or not name or "<" in name or module == "__main__":
        raise SideError(
            f"benchmark {benchmark.name}: pull-request mode imports the job from each revision by name, but "
            f"{job!r} has none (a lambda, a nested or a __main__ function): give the Benchmark a module-level "
            "function of an importable module"
        )
    return module, name


def job_import_root(module: str) -> Path | None:
    """The directory this process imported `module` from -- the ``sys.path`` entry holding its top-level
    package: a repository's root, its ``src/``, a subfolder with its own pytest rootdir --, or None where the
    module was not imported here or has no file."""
    path = getattr(sys.modules.get(module), "__file__", None)
    if not path:
        return None
    file = Path(path).resolve()
    depth = len(module.split(".")) - 1 + (1 if file.name == "__init__.py" else 0)
    return file.parents[depth]


def side_roots(module: str, repo_root: Path, ref_tree: Path, change_root: Path) -> tuple[Path, Path]:
    """Where (REF, the change) import the job module from: the place in REF's worktree (a checkout of
    `repo_root` at REF) that matches where this process imported the working tree's from -- both versions
    resolved alike. Where the module's file is not known here, or lies outside the repository, REF's worktree
    root and pytest's rootdir."""
    change = job_import_root(module)
    repo = repo_root.resolve()
    if change is None or not change.is_relative_to(repo):
        return ref_tree, change_root
    return ref_tree / change.relative_to(repo), change


@dataclass(frozen=True)
class SideSpec:
    """Everything a side's process needs, as plain picklable data."""

    side: str
    job_root: Path  # the tree the job module is imported from
    job_module: str
    job_name: str
    benchmark: Benchmark  # start_query and workload are replaced on the far side
    settings: ExperimentSettings
    kafka: Mapping[str, Any]  # KafkaCluster's fields
    spark: SparkCluster
    results_dir: Path
    experiment_id: str
    testbed: Mapping[str, Any]
    generator_client_config: Mapping[str, Any] = field(default_factory=dict)


def _no_workload(load: int) -> Workload:
    raise RuntimeError("a side is sent each workload by its parent")


def _placeholder_job(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a side imports its own job")


def spec_for(
    side: str,
    job_root: Path,
    benchmark: Benchmark,
    settings: ExperimentSettings,
    kafka: KafkaCluster,
    spark: SparkCluster,
    results_dir: Path,
    experiment_id: str,
    testbed: Mapping[str, Any],
) -> SideSpec:
    module, name = job_reference(benchmark)
    return SideSpec(
        side=side,
        job_root=job_root,
        job_module=module,
        job_name=name,
        benchmark=replace(benchmark, start_query=_placeholder_job, workload=_no_workload),
        settings=settings,
        kafka={
            "bootstrap_servers": kafka.bootstrap_servers,
            "provider": kafka.provider,
            "properties": dict(kafka.properties),
            "request_timeout_s": kafka.request_timeout_s,
            "topic_prefix": kafka.topic_prefix,
            "replication_factor": kafka.replication_factor,
            "min_insync_replicas": kafka.min_insync_replicas,
            "fixed_topics": dict(kafka.fixed_topics),
        },
        spark=spark,
        results_dir=results_dir,
        experiment_id=experiment_id,
        testbed=dict(testbed),
        generator_client_config=dict(kafka.properties),
    )
