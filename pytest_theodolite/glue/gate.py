"""A gate point on the test's side: its state across the session, the fixture's work and the check that
turns a verdict into a pass, a failure or exit code 7."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import xdist

from pytest_theodolite.engine.benchmark import experiment_settings_dict
from pytest_theodolite.engine.capacity_probe import CapacityMeasurement
from pytest_theodolite.engine.experiment import SubExperimentListener
from pytest_theodolite.engine.gate import GatePoint
from pytest_theodolite.engine.markers import gate_spec
from pytest_theodolite.engine.session import TheodoliteSession, summarise
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.engine.testbed import testbed
from pytest_theodolite.glue.outcomes import EXIT_NO_VERDICT, VERDICT_OUTCOMES, TestOutcome
from pytest_theodolite.glue.scheduler import write_gate_points
from pytest_theodolite.infra.isolation import MeasurementLock
from pytest_theodolite.infra.shared import release_all
from pytest_theodolite.judge.comparison import PointComparison
from pytest_theodolite.pull_request.preflight import check_ref_holds_jobs
from pytest_theodolite.pull_request.worktree import CompareRefError
from pytest_theodolite.report.comment import BenchmarkSection, GateCounts, pr_comment, results_link
from pytest_theodolite.report.progress import progress_line
from pytest_theodolite.store.baseline import (
    Baseline,
    BaselineError,
    baseline_from_measurement,
    baseline_path,
    load_baseline,
    write_baseline,
)

#: set on the items that are points of a gate (a ``theodolite`` marker and the ``theodolite_load`` parameter)
GATE_POINT_KEY = pytest.StashKey[bool]()
SETTINGS_KEY = pytest.StashKey[TheodoliteSettings]()
STATE_KEY = pytest.StashKey["GateState"]()


def settings_of(config: pytest.Config) -> TheodoliteSettings:
    return config.stash[SETTINGS_KEY]


def state_of(config: pytest.Config) -> GateState:
    return config.stash[STATE_KEY]


#: start(what) runs a part of the set-up; a broken part stops the run with one message (setup.start_or_stop)
Starter = Callable[[Callable[[], Any]], Any]


@dataclass(eq=False)  # registered as a plugin: pluggy needs it hashable (by identity)
class GateState:
    """What the gates of this pytest process measured, and how their tests ended."""

    session: TheodoliteSession | None = None
    baselines: dict[str, Baseline | None] = field(default_factory=dict)
    tolerances: dict[str, int] = field(default_factory=dict)
    cost_tolerances: dict[str, float | None] = field(default_factory=dict)
    spec_errors: list[str] = field(default_factory=list)
    summary: dict[str, Any] | None = None  # rendered summaries; from xdist workers via workeroutput
    worker_summaries: list[dict[str, Any]] = field(default_factory=list)
    #: under pytest-xdist with --theodolite-isolation exclusive (see isolation.py); made on first use
    measurement_lock: MeasurementLock | None = None
    unmeasured: int = 0
    regressions: int = 0
    other_failures: int = 0
    #: the merged answers of the pytest_theodolite_testbed hook; None: not asked yet
    testbed_extra: dict[str, str] | None = None
    #: the most instances the gates this session runs ask for (instances_needed); None: no gate is run
    instances_needed: int | None = None

    # hooks of this object, registered per config (the report hooks get no config to find the state in)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = {name for name, _ in report.user_properties}
        if report.skipped and "theodolite.unmeasured" in properties:
            self.unmeasured += 1  # a point no verdict could be reached for: skipped with its reason
            return
        if not report.failed:
            return
        if "theodolite.unmeasured" in properties:
            self.unmeasured += 1
        elif "theodolite.regression" in properties:
            self.regressions += 1
        else:
            self.other_failures += 1

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        summary = getattr(node, "workeroutput", {}).get("theodolite_summary")
        if summary:
            self.worker_summaries.append(summary)


@dataclass
class TheodoliteGate:
    """One point of a gate: demand(load) measured in setup; ``check()`` judges it against its reference."""

    measured: GatePoint
    record_property: Callable[[str, object], None]
    checked: bool = False  # check() ran; if the test body did not call it, the plugin does after the body

    @property
    def point(self) -> Any:
        """The change's demand point (load, resources, status, sub-experiments)."""
        return self.measured.point

    @property
    def comparison(self) -> PointComparison:
        return self.measured.comparison()

    def check(self) -> PointComparison:
        self.checked = True
        comparison = self.measured.comparison()
        for key, value in self.measured.junit_properties(comparison):
            self.record_property(key, value)
        load = self.measured.point.load
        outcome = VERDICT_OUTCOMES[comparison.verdict]
        if not outcome.verdict_reached:
            # neither a pass nor a regression: counted with the unmeasured loads (exit 7), with its reason
            self.record_property("theodolite.unmeasured", load)
            if outcome.test is TestOutcome.SKIPPED:
                pytest.skip(self.measured.failure_message(comparison))
            pytest.fail(self.measured.failure_message(comparison), pytrace=False)
        if outcome.test is TestOutcome.FAILED:
            self.record_property("theodolite.regression", load)
            pytest.fail(self.measured.failure_message(comparison), pytrace=False)
        return comparison


def measure_gate_point(
    request: pytest.FixtureRequest,
    load: int,
    settings: TheodoliteSettings,
    state: GateState,
    start: Starter,
    record_property: Callable[[str, object], None],
) -> TheodoliteGate:
    """The ``theodolite_gate`` fixture's work: the baseline loaded (once per benchmark), the load measured,
    an unmeasured load failed, and with --theodolite-update-baselines the baseline rewritten."""
    marker = request.node.get_closest_marker("theodolite")
    spec = gate_spec(
        marker.args,
        marker.kwargs,
        settings.gate_overrides,
        settings.job_options,
        pull_request=bool(settings.compare_ref),
        update_baselines=settings.update_baselines,
    )
    name = spec.benchmark.name
    if name not in state.baselines:
        path = baseline_path(settings.baselines_dir, name)
        try:
            state.baselines[name] = load_baseline(path, name)
        except BaselineError as exc:
            pytest.fail(f"pytest-theodolite: {exc}", pytrace=False)
    baseline = state.baselines[name]
    state.tolerances[name] = spec.tolerance
    state.cost_tolerances[name] = spec.cost_tolerance
    if baseline is None and not settings.update_baselines and not settings.compare_ref:
        # nothing to judge against is no pass: skipped with its reason and counted as unmeasured (exit 7)
        request.node.user_properties.append(("theodolite.unmeasured", load))
        pytest.skip(
            f"no baseline for {name} at {baseline_path(settings.baselines_dir, name)}: record one with "
            f"`{sys.executable} -m pytest {request.node.nodeid.split('[')[0]} --theodolite-update-baselines` "
            "and commit it"
        )
    session: TheodoliteSession = request.getfixturevalue("theodolite")
    if session.on_sub_experiment is None:  # a session a conftest made: its gates report through the hook too
        session.on_sub_experiment = sub_experiment_hook(request.config)
    state.session = session
    experiment = start(lambda: session.experiment(spec.benchmark, spec.settings))
    not_comparable, host_speed = session.judged_against(baseline, recording=settings.update_baselines)
    measured: GatePoint = start(
        lambda: experiment.gate_point(spec, load, baseline, session, not_comparable, host_speed)
    )
    if measured.unmeasured:
        request.node.user_properties.append(("theodolite.unmeasured", load))
        pytest.fail(
            f"pytest-theodolite: could not measure the demand of {name} at load {load}: {measured.point.reason}",
            pytrace=False,
        )
    if settings.update_baselines:
        current = testbed(
            settings,
            session.spark,
            spec.settings.instance_cpu,
            session.calibration,
            testbed_extra(request.config),
        )
        updated = baseline_from_measurement(
            name,
            experiment.demand_result(),
            {
                **experiment_settings_dict(spec.benchmark, spec.settings, current.to_dict()),
                "tolerance": spec.tolerance,
            },
            current,
            previous=baseline,
            loads=spec.settings.loads,
            # every load measured so far: each update rewrites the whole file
            cost=experiment.baseline_costs(session),
            capacity=experiment.baseline_capacities(),
        )
        write_baseline(baseline_path(settings.baselines_dir, name), updated)
        state.baselines[name] = updated
        measured = replace(measured, baseline=updated)
    return TheodoliteGate(measured, record_property)


def instances_needed(items: list[pytest.Item], settings: TheodoliteSettings) -> int | None:
    """The most instances the gate points among `items` (those left after -k and -m) ask for -- two at least in
    pull-request mode, whose paired read gives each side one -- up to --theodolite-max-instances; None where no
    gate point is run. A cluster started here starts that many workers, not the maximum: each is a JVM."""
    needed = 0
    for item in items:
        marker = item.get_closest_marker("theodolite")
        if marker is None or not item.stash.get(GATE_POINT_KEY, False):
            continue
        try:
            spec = gate_spec(marker.args, marker.kwargs, settings.gate_overrides, settings.job_options)
        except ValueError:
            return settings.max_instances  # reported where the gate runs; start what the settings allow
        needed = max(needed, *spec.settings.resources, 2 if settings.compare_ref else 1)
    return min(needed, settings.max_instances) if needed else None


def check_compare_ref(config: pytest.Config, gate_items: list[pytest.Item]) -> None:
    """Pull-request mode: REF must exist and hold every gate's job module, or nothing is measured."""
    ref = settings_of(config).compare_ref
    assert ref is not None
    benchmarks = [item.get_closest_marker("theodolite").args[0] for item in gate_items]  # type: ignore[union-attr]
    try:
        check_ref_holds_jobs(config.rootpath, ref, benchmarks)
    except CompareRefError as exc:
        raise pytest.UsageError(f"pytest-theodolite: {exc}") from None


def sub_experiment_hook(config: pytest.Config) -> SubExperimentListener:
    def call(benchmark: str, record: Any, timings: Any) -> None:
        config.hook.pytest_theodolite_sub_experiment(
            config=config, benchmark=benchmark, record=record, timings=timings
        )

    return call


def report_progress(config: pytest.Config, benchmark: str, record: Any, timings: Any) -> None:
    """The plugin's own pytest_theodolite_sub_experiment: a progress line as each sub-experiment (or capacity
    measurement) ends."""
    if isinstance(record, CapacityMeasurement):
        live(config, f"theodolite: {benchmark} {record.progress_text()}")
        return
    live(config, f"theodolite: {benchmark} {progress_line(record, timings)}")


def testbed_extra(config: pytest.Config) -> dict[str, str]:
    """The merged answers of pytest_theodolite_testbed (asked once, when first needed: conftests are loaded)."""
    state = state_of(config)
    if state.testbed_extra is None:
        extra: dict[str, str] = {}
        for answer in config.hook.pytest_theodolite_testbed(config=config):
            if not isinstance(answer, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in answer.items()
            ):
                raise pytest.UsageError(
                    f"pytest-theodolite: pytest_theodolite_testbed returned {answer!r}: "
                    "return a dict of texts, e.g. {'runner': 'ubuntu-24.04-2core'}"
                )
            extra.update(answer)
        state.testbed_extra = extra
    return state.testbed_extra


def live(config: pytest.Config, line: str) -> None:
    """Write a line to the terminal now, past pytest's output capturing (as live logging does)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


def measurement_lock(session: pytest.Session) -> MeasurementLock | None:
    """The lock that keeps other tests from running beside a measurement; only xdist workers need one."""
    config = session.config
    state = state_of(config)
    if (
        state.measurement_lock is None
        and xdist.is_xdist_worker(session)
        and settings_of(config).isolation == "exclusive"
    ):
        # the directory all workers of this run share (as for the shared broker)
        state.measurement_lock = MeasurementLock(
            config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
        )
    return state.measurement_lock


def write_summaries(terminalreporter: Any, config: pytest.Config, *, interrupted: bool = False) -> None:
    """Every process's summary at the end of the run, as Markdown into GitHub's step summary, and the
    pull-request comment file where one was asked for."""
    state = state_of(config)
    summaries = [s for s in [state.summary, *state.worker_summaries] if s]
    controller = not xdist.is_xdist_worker(terminalreporter)  # it has the .config xdist looks at
    comment_path = config.getoption("theodolite_pr_comment", None)
    if comment_path and controller:
        counts = GateCounts(state.regressions, state.unmeasured, state.other_failures, interrupted)
        write_pr_comment(Path(comment_path), summaries, counts, settings_of(config), config.rootpath)
    if not summaries:
        return
    terminalreporter.section("theodolite: scalability gates")
    for summary in summaries:
        for line in summary["lines"]:
            terminalreporter.write_line(line)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary and controller:
        with open(step_summary, "a", encoding="utf-8") as out:
            out.write("\n".join(s["markdown"] for s in summaries) + "\n")


def write_pr_comment(
    path: Path,
    summaries: list[dict[str, Any]],
    counts: GateCounts,
    settings: TheodoliteSettings,
    rootdir: Path,
) -> None:
    """The comment a workflow posts: written also when no gate ran, so that the posting step finds it. The
    results directory is named relative to the rootdir, as in the workflow's artifact, where it lies in it."""
    sections = [BenchmarkSection.from_dict(b) for s in summaries for b in s.get("benchmarks", ())]
    results_dir = settings.results_dir / "change" if settings.compare_ref else settings.results_dir
    if results_dir.is_relative_to(rootdir):
        results_dir = results_dir.relative_to(rootdir)
    text = pr_comment(
        sorted(sections, key=lambda section: section.name),
        counts,
        results_link=results_link(os.environ),
        results_dir=str(results_dir),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def mark_gate_points(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the gate points among the collected items (one xdist group); pull-request mode's REF checked
    before anything is measured; under xdist, this worker's gate points listed for the scheduler."""
    errors = state_of(config).spec_errors
    if errors:
        raise pytest.UsageError("pytest-theodolite: bad theodolite marker:\n  " + "\n  ".join(errors))
    for item in items:
        callspec = getattr(item, "callspec", None)
        if (
            item.get_closest_marker("theodolite") is not None
            and callspec
            and "theodolite_load" in callspec.params
        ):
            item.stash[GATE_POINT_KEY] = True
            item.add_marker(pytest.mark.xdist_group("theodolite"))
    gate_items = [item for item in items if item.stash.get(GATE_POINT_KEY, False)]
    if gate_items:
        # a broken pytest_theodolite_testbed is a usage error before anything is measured
        testbed_extra(config)
        if settings_of(config).compare_ref:
            check_compare_ref(config, gate_items)
    if xdist.is_xdist_worker(session):
        write_gate_points(
            config._tmp_path_factory.getbasetemp().parent,  # type: ignore[attr-defined]
            config.workerinput["workerid"],  # type: ignore[attr-defined]
            [item.nodeid for item in gate_items],
        )


def finish_session(session: pytest.Session) -> None:
    """The summary of what this process measured; the services xdist's workers shared stopped; exit code 7
    where nothing regressed but some load was not measured or not comparable."""
    state = state_of(session.config)
    if state.session is not None:
        state.summary = summarise(
            state.session,
            state.baselines,
            state.tolerances,
            settings_of(session.config),
            testbed_extra(session.config),
            state.cost_tolerances,
        )
        if xdist.is_xdist_worker(session):
            session.config.workeroutput["theodolite_summary"] = state.summary  # type: ignore[attr-defined]
    if xdist.is_xdist_controller(session):
        # the services the workers shared
        release_all(session.config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    if (
        state.unmeasured
        and not state.regressions
        and not state.other_failures
        and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    ):
        session.exitstatus = EXIT_NO_VERDICT
