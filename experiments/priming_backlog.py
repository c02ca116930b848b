"""How much input a repetition still owed when its priming ended, and what that cost it. Reads recorded runs (any
results directories of the adaptive protocol) and prints, per repetition, how long it was primed without the CPU
limit, the consumer lag when the limit applied -- in seconds of its load, so that loads compare -- the median of
its last micro-batches under the limit, its stop and the seconds it took, then counts apart the repetitions
primed to the priming bound while still owing nearly all the input of their priming (the first micro-batches
of cold executors had not finished) and the others, per instance count.

    python experiments/priming_backlog.py RESULTS_DIR... [--owed 0.8]

A repetition "owed its priming" where the lag at the limit was at least ``--owed`` times what arrived while it
was primed: the job had taken in little of it, and under the limit it works that backlog off at what its
capacity exceeds the load by -- slowly at the edge of its capacity.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from replay_protocol import samples

from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.store.results import iter_repetition_series, list_experiment_ids, read_results


@dataclasses.dataclass(frozen=True)
class PrimedRepetition:
    """One recorded repetition, as its priming left it."""

    where: str  # results directory and experiment
    load: int
    instances: int
    primed_s: float
    max_prime_s: float
    owed_s: float  # the lag when the CPU limit applied, in seconds of the offered rate
    batch_s: float | None  # median duration of the last four micro-batches that finished
    stop: str
    certain: bool
    seconds: float  # first to last lag sample

    def owed_its_priming(self, owed: float) -> bool:
        return self.primed_s >= self.max_prime_s - 1 and self.owed_s >= owed * self.primed_s


def primed_repetitions(directories: Iterable[Path]) -> list[PrimedRepetition]:
    """Every recorded repetition of the adaptive protocol that was primed without the limit."""
    found = []
    for directory in directories:
        for experiment in list_experiment_ids(directory):
            results = read_results(directory, experiment)
            plan = MeasurementPlan.from_dict(results.settings.get("protocol") or {})
            if not plan.adaptive or not plan.prime_unlimited:
                continue
            for sub in results.sub_experiments:
                for repetition, series in iter_repetition_series(results, sub.load, sub.resources):
                    record = next((r for r in sub.repetitions if r.repetition == repetition), None)
                    protocol = dict(record.protocol) if record is not None else {}
                    lag = series.get("lag-trend")
                    primed = protocol.get("primed_s")
                    rate = protocol.get("offered_rate") or sub.target_rate
                    if (
                        record is None
                        or lag is None
                        or primed is None
                        or not rate
                        or not protocol.get("stop")
                    ):
                        continue
                    t0 = lag.timestamps_s[0]
                    at_limit = next(
                        (v for t, v in zip(lag.timestamps_s, lag.values, strict=True) if t - t0 >= primed),
                        lag.values[-1],
                    )
                    # each batch once, by the first sample that names it finished
                    finished = {b: ms for _, _, b, ms, _, _ in samples(series) if b is not None and ms}
                    last = list(finished.values())[-4:]
                    batch = statistics.median(last) / 1000 if last else None
                    found.append(
                        PrimedRepetition(
                            f"{directory} {experiment}",
                            sub.load,
                            sub.resources,
                            float(primed),
                            plan.max_prime_s,
                            float(at_limit) / float(rate),
                            batch,
                            str(protocol["stop"]),
                            record.certain,
                            lag.timestamps_s[-1] - t0,
                        )
                    )
    return found


def summary(repetitions: list[PrimedRepetition], owed: float) -> list[str]:
    """Per instance count and group (owed its priming or not): repetitions, uncertain ones, mean seconds."""
    groups: dict[tuple[int, bool], list[PrimedRepetition]] = defaultdict(list)
    for repetition in repetitions:
        groups[(repetition.instances, repetition.owed_its_priming(owed))].append(repetition)
    lines = [
        "| instances | owed its priming | repetitions | uncertain | mean seconds |",
        "|---:|---|---:|---:|---:|",
    ]
    for (instances, owing), group in sorted(groups.items()):
        uncertain = sum(not r.certain for r in group)
        mean = statistics.fmean(r.seconds for r in group)
        lines.append(
            f"| {instances} | {'yes' if owing else 'no'} | {len(group)} | {uncertain} | {mean:.0f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", nargs="+", type=Path, help="results directories of recorded runs")
    parser.add_argument(
        "--owed",
        type=float,
        default=0.8,
        help="the share of its priming's input a repetition still owed at the limit to count as owing it",
    )
    args = parser.parse_args()
    if not 0 < args.owed <= 1:
        parser.error(f"--owed must lie in (0, 1], got {args.owed}")
    repetitions = primed_repetitions(args.results)
    if not repetitions:
        parser.error("no repetition primed without the CPU limit in these directories")
    print(
        "| run | load | instances | primed (s) | lag at the limit (s of load) | batch (s) | stop | seconds |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|")
    for r in sorted(repetitions, key=lambda r: (r.instances, r.where, r.load)):
        batch = "-" if r.batch_s is None else f"{r.batch_s:.1f}"
        stop = r.stop + ("" if r.certain else " (uncertain)")
        print(
            f"| {r.where} | {r.load} | {r.instances} | {r.primed_s:.0f} | {r.owed_s:.1f} | {batch} | {stop} "
            f"| {r.seconds:.0f} |"
        )
    print()
    print("\n".join(summary(repetitions, args.owed)))


if __name__ == "__main__":
    main()
