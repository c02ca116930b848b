"""What a gate measures: a Benchmark (a job along one load dimension) and the ExperimentSettings of its
demand or capacity search, as results record them."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_theodolite.core.evaluation import SloSettings
from pytest_theodolite.core.job_contract import RUNNER_OPTIONS, check_contract, imported_packages
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.paired_cost import PAIRED_COST_TOLERANCE
from pytest_theodolite.core.search import Strategy, describe_strategy
from theodolite_generator import Workload


@dataclass(frozen=True)
class Benchmark:
    """A use case (a job with the ``start_query`` contract of ``spark_jobs``) along one load dimension."""

    name: str
    start_query: Callable[..., Any]
    #: load -> what the generator sends, e.g. ``lambda keys: Workload(keys=keys)``
    workload: Callable[[int], Workload]
    job_options: Mapping[str, Any] = field(default_factory=dict)
    input_partitions: int = 4
    #: job options naming further topics the runner creates fresh per repetition (UC4: config/feedback)
    extra_topics: tuple[str, ...] = ()
    #: the extra topic that receives the generator's sensor registry (UC4)
    registry_topic_option: str | None = None

    def job_keywords(self) -> tuple[str, ...]:
        """Every keyword the runner passes the job on every run: the contract's (core/job_contract.py), the
        benchmark's job options and its extra topics."""
        return tuple(dict.fromkeys((*RUNNER_OPTIONS, *self.job_options, *self.extra_topics)))

    def job_packages(self) -> tuple[str, ...]:
        """The packages the job's module imports besides its own and the standard library
        (job_contract.imported_packages); none where its source cannot be read."""
        module = inspect.getmodule(self.start_query)
        try:
            source = inspect.getsource(module) if module is not None else ""
        except (OSError, TypeError):
            return ()
        own = (getattr(module, "__name__", "") or "").partition(".")[0]
        return imported_packages(source, own)

    def check_job(self) -> None:
        """Refuse a job whose ``start_query`` cannot take `job_keywords` (JobContractError, with the
        signature to write), before anything of this benchmark is measured."""
        check_contract(self.name, self.start_query, self.job_keywords())


@dataclass(frozen=True)
class ExperimentSettings:
    loads: tuple[int, ...]
    resources: tuple[int, ...]
    duration_s: float = 60.0  # measured after the warm-up
    sample_interval_s: float = 1.0
    repetitions: int = 1
    slo: SloSettings = field(default_factory=SloSettings)
    strategy: Strategy = Strategy.LINEAR
    lower_bound: bool = True
    #: False: a demand search does not step below its reference's demand once that passed (search.AT_MOST)
    exact_demand: bool = True
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    instance_cpu: float | None = (
        None  # CPU cores per instance where the cluster can limit it; None: unlimited
    )
    #: warm-up and stopping rules; None: Theodolite's fixed protocol (``slo.warmup_s``, then ``duration_s``)
    plan: MeasurementPlan | None = None
    #: pull-request mode: both sides also read a backlog at the same time, compared batch by batch by their
    #: time per record (pull_request/paired_read.py), judged with `paired_cost_tolerance` (None: reported)
    paired_cost: bool = False
    paired_cost_tolerance: float | None = PAIRED_COST_TOLERANCE
    #: pull-request mode's certified search: REF runs one instance below the change's pass at every load (the
    #: verdict's certificate); False: not where the paired read is certain of the cost (pull_request/paired.py)
    ref_below: bool = True

    def __post_init__(self) -> None:
        problems = []
        if not self.loads or any(load < 1 for load in self.loads):
            problems.append(f"loads must be positive whole numbers, got {list(self.loads)}")
        if not self.resources or any(r < 1 for r in self.resources):
            problems.append(f"resources must be positive whole numbers, got {list(self.resources)}")
        if self.duration_s <= 0:
            problems.append(f"duration must be positive, got {self.duration_s} s")
        if self.slo.warmup_s < 0:
            problems.append(f"warm-up must not be negative, got {self.slo.warmup_s} s")
        if not 0 < self.sample_interval_s <= self.duration_s:
            problems.append(f"the sample interval must be in (0, duration], got {self.sample_interval_s} s")
        if self.instance_cpu is not None and not 0 < self.instance_cpu <= 64:
            problems.append(f"instance CPU must be in (0, 64] cores, got {self.instance_cpu}")
        if self.repetitions < 1:
            problems.append(f"repetitions must be at least 1, got {self.repetitions}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def strategy_name(self) -> str:
        return describe_strategy(self.strategy, self.lower_bound)

    @property
    def measurement_plan(self) -> MeasurementPlan:
        if self.plan is not None:
            return self.plan
        return MeasurementPlan(
            warmup_s=self.slo.warmup_s,
            prime_unlimited=False,
            falling_behind_batches=0,
            min_duration_s=self.duration_s,
            max_duration_s=self.duration_s,
        )


def experiment_settings_dict(
    benchmark: Benchmark, settings: ExperimentSettings, testbed: Mapping[str, Any]
) -> dict[str, Any]:
    """Every setting of an experiment, for the results JSON (secrets are redacted by the writer)."""
    return {
        "benchmark": benchmark.name,
        "job": f"{benchmark.start_query.__module__}.{benchmark.start_query.__qualname__}",
        "job_options": dict(benchmark.job_options),
        "input_partitions": benchmark.input_partitions,
        "duration_s": settings.duration_s,
        "warmup_s": settings.slo.warmup_s,
        "protocol": settings.measurement_plan.to_dict(),
        "sample_interval_s": settings.sample_interval_s,
        "repetitions": settings.repetitions,
        "strategy": settings.strategy_name,
        "exact_demand": settings.exact_demand,
        "paired_cost": settings.paired_cost,
        "paired_cost_tolerance": settings.paired_cost_tolerance,
        "ref_below": settings.ref_below,
        "spark_conf": dict(settings.spark_conf),
        "instance_cpu": settings.instance_cpu,
        "testbed": dict(testbed),
    }
