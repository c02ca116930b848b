"""Which figure of a paired read tells unchanged code from a change best? Each candidate computed from the same
recorded batches (`<results>/<benchmark>_paired_cost.json`, as pull-request mode and paired_read_aa.py keep
them), and the rule fixed before the test ran (docs/lab-notes/capacity.md, "2026-12-01 (evening)"):

- S0: the median of the batch-by-batch ratios, change over REF (what the gate judges);
- S1: the ratio of the sides' medians;
- S2: the Hodges-Lehmann estimate: the median of the pairwise (Walsh) averages of the ratios' logarithms;
- S3: S0 over the pairs after the first two (five warm batches instead of three).

noise: the largest |figure| of the unchanged (A/A) reads; gap: the smallest A/B figure minus the largest A/A one.
A candidate replaces S0 only if its gap exceeds S0's by at least one point and its noise is no larger.

    python experiments/paired_figures.py --aa /tmp/stat-s70/round-{1,3,5} --ab /tmp/stat-s70/round-{2,4,6}
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable, Sequence
from itertools import combinations_with_replacement
from pathlib import Path

from own_job_quality import recorded_per_record

from pytest_theodolite.core.paired_cost import batch_ratios, paired_cost

#: how much more of a gap a candidate needs than S0 to replace it (fixed before the test)
MIN_GAIN = 0.01


def median_of_ratios(ref: Sequence[float], change: Sequence[float]) -> float:
    return paired_cost(ref, change).change


def ratio_of_medians(ref: Sequence[float], change: Sequence[float]) -> float:
    n = min(len(ref), len(change))
    return statistics.median(change[:n]) / statistics.median(ref[:n]) - 1


def hodges_lehmann(ref: Sequence[float], change: Sequence[float]) -> float:
    logs = [math.log(ratio) for ratio in batch_ratios(ref, change)]
    return math.exp(statistics.median((a + b) / 2 for a, b in combinations_with_replacement(logs, 2))) - 1


def later_pairs(ref: Sequence[float], change: Sequence[float]) -> float:
    return median_of_ratios(ref[2:], change[2:])


STATISTICS: dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {
    "S0 median of ratios": median_of_ratios,
    "S1 ratio of medians": ratio_of_medians,
    "S2 Hodges-Lehmann": hodges_lehmann,
    "S3 last ten pairs": later_pairs,
}


def reads(folders: Sequence[Path]) -> list[tuple[str, list[float], list[float]]]:
    found = []
    for folder in folders:
        files = sorted(folder.glob("*_paired_cost.json"))
        if not files:
            raise SystemExit(f"{folder}: no *_paired_cost.json (a paired read's results folder was expected)")
        for path in files:
            sides = json.loads(path.read_text())["sides"]
            if not sides.get("ref") or not sides.get("change"):
                raise SystemExit(f"{path}: a side has no batches (the read failed: see its 'problem')")
            per_record = recorded_per_record(sides)
            found.append((f"{folder.parent.name}/{folder.name}", per_record["ref"], per_record["change"]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--aa", type=Path, nargs="+", required=True, help="results folders of unchanged reads"
    )
    parser.add_argument(
        "--ab", type=Path, nargs="+", required=True, help="results folders of reads of a change"
    )
    args = parser.parse_args()
    groups = {"A/A": reads(args.aa), "A/B": reads(args.ab)}
    names = list(STATISTICS)
    print("| read | kind | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    figures: dict[str, dict[str, list[float]]] = {name: {"A/A": [], "A/B": []} for name in names}
    for kind, group in groups.items():
        for label, ref, change in group:
            row = []
            for name, statistic in STATISTICS.items():
                value = statistic(ref, change)
                figures[name][kind].append(value)
                row.append(f"{value:+.1%}")
            print(f"| {label} | {kind} | " + " | ".join(row) + " |")
    print()
    summary = {}
    for name in names:
        noise = max(abs(value) for value in figures[name]["A/A"])
        gap = min(figures[name]["A/B"]) - max(figures[name]["A/A"])
        summary[name] = (noise, gap)
        print(f"{name}: noise {noise:.1%}, gap {gap:+.1%}")
    base_noise, base_gap = summary[names[0]]
    better = [
        name
        for name in names[1:]
        if summary[name][1] >= base_gap + MIN_GAIN and summary[name][0] <= base_noise
    ]
    chosen = max(better, key=lambda name: summary[name][1]) if better else names[0]
    print(f"by the rule: {chosen}" + ("" if better else " stays (no candidate met it)"))


if __name__ == "__main__":
    main()
