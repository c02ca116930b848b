"""The paired backlog read of pull-request mode (``paired_cost``): once per benchmark, both sides read a backlog of
the highest load's keys at the same time, each on one instance, in large capped batches (engine/backlog_read.py),
while the parent holds the cluster's session lock; their time per record -- each batch's cycle, from its start to
the next batch's: the inverse of its wall-clock throughput -- is compared batch by batch (core/paired_cost.py) and
kept with both sides' batches in ``<benchmark>_paired_cost.json``.

`PairedRead` drives the two reading sides (their driver processes, sides.py), watches what they tell as they read,
and judges the figure against its tolerance; a read that gave no figure says why, and a pass needs one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

from pytest_theodolite.core.cost import CostCheck
from pytest_theodolite.core.outcomes import CostStatus
from pytest_theodolite.core.paired_cost import (
    PairedCost,
    batch_ratios_by_leg,
    check_paired_cost,
    check_paired_cost_twice,
    first_certain_pass,
    paired_cost_by_leg,
    rose_beyond,
)
from pytest_theodolite.engine.backlog_read import BacklogPlan, BacklogRead
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.pull_request.paired import CHANGE, REF, SIDES
from pytest_theodolite.pull_request.side_spec import SideError
from pytest_theodolite.pull_request.sides import SideProcess
from pytest_theodolite.report.paired import PairedReadResult
from pytest_theodolite.store.results import experiment_id

#: how long the parent waits for one reading side's word before it looks at the other's
READ_POLL_S = 0.25


@dataclass
class PairedBacklogRead:
    """One backlog read by both sides at once: each side's read, what each told as it read, the pairs after which
    both were told to stop (certain of a pass; None: read to the end), their comparison or why there is none."""

    reads: dict[str, BacklogRead] = field(default_factory=dict)
    told: dict[str, list[list[float]]] = field(default_factory=dict)
    stopped_at: int | None = None
    cost: PairedCost | None = None
    problem: str | None = None


@dataclass
class PairedRead:
    """One benchmark's paired backlog read: the first read, the second where the first rose beyond the tolerance
    (``BacklogPlan.confirm_rise``), and their judgement."""

    benchmark: Benchmark
    settings: ExperimentSettings
    sides: Mapping[str, SideProcess]
    plan: BacklogPlan = field(default_factory=BacklogPlan)
    #: the first read (None: not read yet, or it could not start)
    first: PairedBacklogRead | None = None
    #: why the read could not start at all (None: it started, or was not asked for)
    refused: str | None = None
    #: the second read, where the first rose beyond the tolerance
    confirmation: PairedBacklogRead | None = None

    @property
    def figure(self) -> PairedCost | None:
        """The first read's comparison; None where it gave none."""
        return None if self.first is None else self.first.cost

    @property
    def problem(self) -> str | None:
        """Why the first read gave no figure (None: it gave one, or was not read)."""
        return self.refused or (None if self.first is None else self.first.problem)

    @property
    def stopped_at(self) -> int | None:
        return None if self.first is None else self.first.stopped_at

    def read(self, first: str = REF) -> None:
        """Read once per benchmark, where ``paired_cost`` asks for it. `first` is the side asked to start first
        (an experiment swaps it to see whether the order leans). A read whose figure rose beyond the tolerance,
        significantly or not, is read once more with the other side asked first, kept in
        ``<benchmark>_paired_cost_confirmation.json``: the cost is a regression only where both rose beyond it
        and their pairs together significantly (`check`)."""
        if first not in SIDES:
            raise ValueError(f"first is one of {', '.join(SIDES)}, not {first!r}")
        if not self.settings.paired_cost or self.first is not None or self.refused:
            return
        if self.sides[REF].spec.spark.max_instances < 2:
            self.refused = (
                "it needs two instances at once, one per side: raise --theodolite-max-instances to 2 or more"
            )
            return
        if self.sides[REF].spec.kafka.get("fixed_topics"):
            # both sides would write into and read from the same topics at once, each emptying them for itself
            self.refused = (
                "both sides would read the same pre-created topics (--kafka-topics) at once: let the gates "
                "create their own topics, or judge the demand alone with paired_cost=false"
            )
            return
        load = max(self.settings.loads)
        self.first = self._read_both(load, first)
        self._write(load, self.first)
        if (
            self.plan.confirm_rise
            and self.first.cost
            and rose_beyond(self.first.cost, self.settings.paired_cost_tolerance)
        ):
            self.confirmation = self._read_both(load, CHANGE if first == REF else REF)
            self._write(load, self.confirmation, "_confirmation")

    def _read_both(self, load: int, first: str) -> PairedBacklogRead:
        """Both sides' backlog reads at once, `first` asked first, and their comparison."""
        spark = self.sides[REF].spec.spark
        workload = self.benchmark.workload(load)
        problems: list[str] = []
        read = PairedBacklogRead()
        with spark.sessions_held():
            asked = []
            for side in sorted(SIDES, key=lambda side: side != first):
                try:
                    self.sides[side].start_backlog_read(load, workload, self.plan)
                    asked.append(side)
                except SideError as exc:
                    problems.append(_last_line(str(exc)))
            filled = []
            for side in asked:
                try:
                    self.sides[side].backlog_filled()
                    filled.append(side)
                except SideError as exc:
                    problems.append(f"{side}: {_last_line(str(exc))}")
            # both stop filling and start reading together, so that neither reads while the other's generator
            # still sends (docs/lab-notes/capacity.md, 2026-12-01); each side filled is let read and answered,
            # whatever the other did, so its pipe stays in step
            for side in filled:
                self.sides[side].start_reading()
            self._gather(read, filled, problems)
        if not problems:
            try:
                read.cost = paired_cost_by_leg(
                    *(read.reads[side].cycle_per_record_by_leg() for side in SIDES)
                )
            except ValueError as exc:
                problems.append(str(exc))
        read.problem = "; ".join(problems) or None
        return read

    def _gather(self, read: PairedBacklogRead, reading: list[str], problems: list[str]) -> None:
        """Wait for the reading sides' reads into `read`. Each side sends its batches' cycle per record as they
        come in; once both sides' pairs so far lie certainly within the paired tolerance (first_certain_pass),
        both are told to stop -- a pass needs no more batches. A rise is read to the end, so that looking after
        every pair adds no false alarm (docs/lab-notes/capacity.md, 2026-12-02)."""
        tolerance = self.settings.paired_cost_tolerance
        watch = self.plan.stop_when_certain and tolerance is not None and len(reading) == len(SIDES)
        so_far = read.told = {side: [] for side in reading}
        pending = list(reading)
        while pending:
            told = False  # a side told new figures in this round
            for side in list(pending):
                try:
                    message = self.sides[side].backlog_message(READ_POLL_S)
                except SideError as exc:
                    problems.append(f"{side}: {_last_line(str(exc))}")
                    pending.remove(side)
                    watch = False  # the other side is read to the end: its read is kept as it is
                    continue
                if isinstance(message, BacklogRead):
                    read.reads[side] = message
                    pending.remove(side)
                elif message is not None:
                    so_far[side], told = message, True
            if watch and told and tolerance is not None:
                by_leg = batch_ratios_by_leg(so_far[REF], so_far[CHANGE])
                certain = first_certain_pass([ratio for leg in by_leg for ratio in leg], tolerance)
                if certain is not None:
                    watch, read.stopped_at = False, certain
                    for side in pending:
                        self.sides[side].stop_reading()

    def _write(self, load: int, read: PairedBacklogRead, suffix: str = "") -> None:
        results = self.sides[REF].spec.results_dir.parent
        results.mkdir(parents=True, exist_ok=True)
        document = {
            "load": load,
            "plan": asdict(self.plan),
            "sides": {
                side: {
                    "batches": [[b.batch_id, b.start_s, b.duration_s, b.input_rows] for b in backlog.batches],
                    "cycle_s": list(backlog.cycle_s),
                    "task_cpu_s": list(backlog.task_cpu_s),
                    "wall_s": backlog.wall_s,
                    "read_from_s": backlog.read_from_s,
                    "legs": list(backlog.legs),
                    "drained": backlog.drained,
                    "fill_s": backlog.fill_s,
                    "backlog_records": backlog.backlog_records,
                    "told_cycle_per_record_s": read.told.get(side),
                }
                for side, backlog in read.reads.items()
            },
            "comparison": None if read.cost is None else read.cost.to_dict(),
            "problem": read.problem,
            "stopped_certain_after_pairs": read.stopped_at,
        }
        path = results / f"{experiment_id(self.benchmark.name)}_paired_cost{suffix}.json"
        path.write_text(json.dumps(document, indent=1) + "\n")

    def judged(self) -> bool:
        """Whether the read judged the cost (its tolerance set, enough pairs): then the CPU per record at each
        demand is not needed, and the demands are certified rather than searched (paired.py)."""
        check = self.check()
        return check is not None and check.tolerance is not None and check.status != CostStatus.NOT_COMPARED

    def certain(self) -> bool:
        """Whether the read is certain the change costs within its tolerance: one read, its pairs below the
        tolerance by the test a read stops early on (first_certain_pass); a read that rose beyond it, and was
        read again, is not."""
        tolerance = self.settings.paired_cost_tolerance
        if tolerance is None or self.figure is None or self.confirmation is not None:
            return False
        return first_certain_pass(self.figure.ratios, tolerance) is not None

    def check(self) -> CostCheck | None:
        """The figure against its tolerance (core/paired_cost.check_paired_cost); None unread. Where a second read
        was made (the first rose beyond the tolerance), both are judged together
        (core/paired_cost.check_paired_cost_twice); where it could not be read, the cost is not judged."""
        if self.figure is None:
            return None
        tolerance = self.settings.paired_cost_tolerance
        first = check_paired_cost(self.figure, tolerance)
        if self.confirmation is None or tolerance is None:
            return first
        if self.confirmation.cost is None:
            return replace(
                first,
                status=CostStatus.NOT_COMPARED,
                reason=f"not judged: it rose {first.relative:+.1%}, and the read to confirm it failed "
                f"({self.confirmation.problem})",
            )
        return check_paired_cost_twice(self.figure, self.confirmation.cost, tolerance)

    def unread(self) -> str | None:
        """Why the read asked for gave nothing to judge, with what to change; None where it gave a figure, or
        none was asked for."""
        if not self.settings.paired_cost:
            return None
        check = self.check()
        if check is not None and check.status != CostStatus.NOT_COMPARED:
            return None
        why = self.problem or (check.reason if check is not None else "it was not read")
        return (
            f"the paired read gave no figure to judge ({why}), and a pass needs it: change what it names (the "
            "loads, the instance CPU, the job's use of max_offsets_per_trigger), or judge the demand alone with "
            "paired_cost=false"
        )

    def result(self) -> PairedReadResult | None:
        """The read as the report reads it; None where none was asked for."""
        if not self.settings.paired_cost:
            return None
        cpu = self.plan.cpu_for(self.settings.instance_cpu)
        limited = cpu is not None and self.sides[REF].spec.spark.can_limit_cpu
        reads = {} if self.first is None else self.first.reads
        return PairedReadResult(
            instance_cores=cpu if limited else None,
            batch_records=self.plan.batch_records,
            planned_batches=self.plan.legs * self.plan.leg_batches,
            figure=self.figure,
            check=self.check(),
            problem=self.problem,
            confirming=None if self.confirmation is None else self.confirmation.cost,
            stopped_at=self.stopped_at,
            drained={side: len(read.batches) for side, read in reads.items() if read.drained},
        )


def _last_line(text: str) -> str:
    """A side's error's last line (the exception, after its traceback)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else text
