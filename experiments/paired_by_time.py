"""Did a paired read's pairs fall at the same time? The read compares batch k of the change with batch k of REF;
where one side runs slower its batch k comes later, and a change of the host's speed in between falls on the
pair unevenly. Reads recorded ``<benchmark>_paired_cost.json`` files and prints per read the change's task CPU
per record over REF's as the gate judges it (median of the batch-by-batch ratios), the same with each of the
change's batches paired with REF's batch nearest in time (only where the two overlap), and how far the sides'
last pair lay apart. No broker, no Spark.

    python experiments/paired_by_time.py RESULTS_DIR/uc1-keys_paired_cost.json ...
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from paired_read_stop import side_batches  # experiments, beside this

#: (middle of the batch, epoch s; duration, s; task CPU per record, s)
Batch = tuple[float, float, float]


def batches_in_time(read: dict, side: str) -> list[Batch]:
    per_record, ends = side_batches(read, side)
    durations = [batch[2] for batch in read["sides"][side]["batches"]]
    return [
        (end - duration / 2, duration, cpu)
        for end, duration, cpu in zip(ends, durations, per_record, strict=True)
    ]


def by_time(ref: list[Batch], change: list[Batch]) -> list[float]:
    """The change's CPU per record over that of REF's batch nearest in time, for each batch that overlaps one."""
    ratios = []
    for middle, duration, per_record in change:
        nearest = min(ref, key=lambda batch: abs(batch[0] - middle))
        if abs(nearest[0] - middle) < max(duration, nearest[1]) / 2:
            ratios.append(per_record / nearest[2])
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("reads", nargs="+", type=Path, help="recorded <benchmark>_paired_cost.json files")
    args = parser.parse_args()
    print("| read | by index (pairs) | by time (pairs) | change's last pair after REF's, s |")
    print("|---|---:|---:|---:|")
    for path in args.reads:
        read = json.loads(path.read_text())
        ref, change = batches_in_time(read, "ref"), batches_in_time(read, "change")
        pairs = min(len(ref), len(change))
        if not pairs:
            print(f"| {path} | no batches | | |")
            continue
        index = [change[k][2] / ref[k][2] for k in range(pairs)]
        timed = by_time(ref, change)
        timed_cell = f"{statistics.median(timed) - 1:+.1%} ({len(timed)})" if timed else "none overlap"
        print(
            f"| {path} | {statistics.median(index) - 1:+.1%} ({pairs}) | {timed_cell} "
            f"| {change[pairs - 1][0] - ref[pairs - 1][0]:+.1f} |"
        )


if __name__ == "__main__":
    main()
