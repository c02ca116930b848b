"""Could pull-request mode's paired backlog read stop once its verdict is certain, rather than after twelve pairs?
(It now does, by this rule: core/paired_cost.first_certain_pass. Reads to replay are read to their end:
``paired_read_aa.py --read-every-batch``.)

Replays recorded reads (``<benchmark>_paired_cost.json``, as pull-request mode and paired_read_aa.py keep them)
pair by pair. After every pair from the sixth on (the fewest the gate judges), a read would stop as a **certain
pass** where a one-sided Wilcoxon signed-rank test says the batch-by-batch ratios lie below ``1 + tolerance``
(p < 0.05 on ``log(ratio) - log(1 + tolerance)``) -- the mirror image of the gate's rule for a regression, which
asks them to lie above 1 and their median beyond the tolerance. A regression is not stopped early: its rule
stays the full read's, so that looking after every pair cannot add false alarms. Prints per read the full read's
verdict (core/paired_cost.check_paired_cost), the pair at which the candidate would have stopped, whether the
verdicts agree, and the seconds of batches the read would not have needed (the later of the two sides' ends).

    python experiments/paired_read_stop.py RESULTS_DIR...            # every *_paired_cost.json below them
    python experiments/paired_read_stop.py RESULTS_DIR... --tolerance 0.07 --changed ab/round-2 ab/round-4

``--changed`` names parts of the paths of the reads whose change side was made dearer (e.g. paired_read_aa.py's even
rounds with ``--change-in even``); a certain pass of one of those is a missed regression. ``--simulate N`` then
draws N reads of twelve pairs per true change (0 % ... +15 %) from the unchanged reads' log-ratios, each read's
centred on its own median and pooled, and prints how often the full read fails the change, how often the
candidate would stop it as a pass, and the pairs it would read on average. No broker, no Spark.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_theodolite.core.outcomes import CostStatus
from pytest_theodolite.core.paired_cost import (
    PAIRED_COST_TOLERANCE,
    batch_ratios,
    check_paired_cost,
    first_certain_pass,
    paired_cost,
)


@dataclass(frozen=True)
class ReplayedRead:
    path: Path
    pairs: int
    change: float  # the full read's figure (+0.05: 5 % dearer)
    verdict: str  # the full read's, as the gate judges it
    stopped_at: int | None  # the pair after which the candidate is certain of a pass (None: never)
    saved_s: float  # seconds of batches after that pair
    ratios: tuple[float, ...]  # batch by batch, change over REF


def side_batches(read: dict, side: str) -> tuple[list[float], list[float]]:
    """A side's measured batches as (task CPU per record, end in epoch seconds), in order."""
    recorded = read["sides"][side]
    per_record = [
        cpu / batch[3] for cpu, batch in zip(recorded["task_cpu_s"], recorded["batches"], strict=True)
    ]
    ends = [batch[1] + batch[2] for batch in recorded["batches"]]
    return per_record, ends


def replay(path: Path, tolerance: float) -> ReplayedRead | None:
    """One recorded read replayed; None where it measured nothing (its problem was recorded instead)."""
    read = json.loads(path.read_text())
    if not read.get("sides") or read.get("comparison") is None:
        return None
    (ref, ref_ends), (change, change_ends) = side_batches(read, "ref"), side_batches(read, "change")
    pairs = min(len(ref), len(change))
    full = paired_cost(ref[:pairs], change[:pairs])
    ratios = batch_ratios(ref, change)
    stopped_at = first_certain_pass(ratios[:pairs], tolerance)
    saved = 0.0
    if stopped_at is not None:
        last = max(ref_ends[pairs - 1], change_ends[pairs - 1])
        saved = last - max(ref_ends[stopped_at - 1], change_ends[stopped_at - 1])
    return ReplayedRead(
        path,
        pairs,
        full.change,
        check_paired_cost(full, tolerance).status,
        stopped_at,
        saved,
        tuple(ratios[:pairs]),
    )


def simulate(residuals: list[float], draws: int, tolerance: float, pairs: int = 12, seed: int = 1) -> None:
    """Reads of `pairs` pairs drawn from `residuals` (log-ratios of unchanged reads, centred) shifted by a true
    change: the full read's regression rate and the candidate's early passes, per true change."""
    rng = np.random.default_rng(seed)
    print(
        "true change | full read fails | candidate stops as pass | of those the full read failed | pairs read"
    )
    for true_change in (0.0, 0.03, 0.05, 0.07, 0.10, 0.15):
        fails = early = early_of_fails = read_pairs = 0
        for _ in range(draws):
            # a draw with replacement repeats values; ties would turn the signed-rank test into a permutation
            # test a second long, so each ratio is moved by a millionth, which only orders tied ones at random
            drawn = rng.choice(residuals, pairs) + rng.normal(0.0, 1e-6, pairs)
            ratios = list(np.exp(drawn + math.log1p(true_change)))
            failed = (
                check_paired_cost(paired_cost([1.0] * pairs, ratios), tolerance).status != CostStatus.PASS
            )
            stop = first_certain_pass(ratios, tolerance)
            fails += failed
            early += stop is not None
            early_of_fails += failed and stop is not None
            read_pairs += stop or pairs
        print(
            f"{true_change:+.0%} | {fails / draws:.1%} | {early / draws:.1%} | {early_of_fails / draws:.1%} | "
            f"{read_pairs / draws:.1f}"
        )


def was_changed(path: Path, changed: list[str]) -> bool:
    return any(part in str(path) for part in changed)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("roots", nargs="+", type=Path, help="folders holding *_paired_cost.json files")
    parser.add_argument("--tolerance", type=float, default=PAIRED_COST_TOLERANCE)
    parser.add_argument(
        "--changed",
        nargs="*",
        default=[],
        help="parts of the paths of the reads whose change side was made dearer",
    )
    parser.add_argument("--simulate", type=int, default=0, help="reads to draw per true change (0: none)")
    args = parser.parse_args()
    paths = sorted({p for root in args.roots for p in root.rglob("*_paired_cost.json")})
    reads = [r for r in (replay(p, args.tolerance) for p in paths) if r is not None]
    print("read | changed | pairs | full read | verdict | certain pass after | agrees | seconds saved")
    missed = stopped = 0
    for read in reads:
        changed = was_changed(read.path, args.changed)
        early_pass = read.stopped_at is not None
        agrees = not early_pass or read.verdict == CostStatus.PASS
        missed += changed and early_pass
        stopped += early_pass
        print(
            f"{read.path} | {'yes' if changed else 'no'} | {read.pairs} | {read.change:+.1%} | {read.verdict} | "
            f"{read.stopped_at or '-'} | {'yes' if agrees else 'NO'} | {read.saved_s:.0f}"
        )
    unchanged = [r for r in reads if not was_changed(r.path, args.changed)]
    print(
        f"{len(reads)} reads: {stopped} would have stopped early as certain passes "
        f"({sum(r.stopped_at is not None for r in unchanged)} of {len(unchanged)} unchanged), "
        f"{missed} of {len(reads) - len(unchanged)} changed reads passed early (missed), "
        f"{sum(r.verdict != CostStatus.PASS and r.stopped_at is not None for r in reads)} full-read regressions "
        "passed early; "
        f"{sum(r.saved_s for r in reads):.0f} s of batches saved"
    )
    if args.simulate:
        residuals = []
        for read in unchanged:
            logs = np.log(read.ratios)
            residuals.extend(logs - np.median(logs))
        simulate(residuals, args.simulate, args.tolerance)


if __name__ == "__main__":
    main()
