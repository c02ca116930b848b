"""How far can the shipped gates be trusted? Runs them repeatedly against the committed baselines and prints,
per gate point and run, the baseline, the measured demand and the verdict, then the false-alarm rate (runs
of unchanged code with a regression), the detection rate (runs with an injected regression that were flagged)
and the wall time of each run.

    python benchmarks/scripts/gate_quality.py --clean 5 --injected 5
    python benchmarks/scripts/gate_quality.py --clean 0 --injected 3 --hash-rounds 12 -k uc1
    python benchmarks/scripts/gate_quality.py --clean 1 --injected 0 -k "uc1 or uc2" --theodolite-protocol

The injected regression needs no code edit: UC1's job option ``extra_hash_rounds`` (spark_jobs/uc1.py) makes
every record pay for that many chained SHA-256 hashes (12 rounds: about +50 % CPU per record in the job's
transform, measured on 1 M records in local mode). ``--theodolite-protocol`` runs Theodolite's own protocol
instead of the gates' (60 s warm-up under the limit, 300 s measured, OLS lag trend only), the long reference
the fast verdicts are compared with. Each run writes its raw results and a JUnit XML under --out; nothing
else may run beside it (the gates measure CPU-limited instances).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THEODOLITE_PROTOCOL = [
    "--theodolite-warmup",
    "60",
    "--theodolite-duration",
    "300",
    "--theodolite-max-duration",
    "300",
    "--theodolite-prime",
    "false",
    "--theodolite-slope-method",
    "ols",
]


@dataclass(frozen=True)
class Point:
    test: str
    load: str
    baseline: str
    measured: str
    verdict: str


@dataclass(frozen=True)
class Run:
    kind: str  # "clean" or "injected"
    index: int
    wall_s: float
    exit_code: int
    points: tuple[Point, ...]

    @property
    def regressions(self) -> list[Point]:
        return [p for p in self.points if p.verdict == "regression"]


def points_of(junit: Path) -> tuple[Point, ...]:
    """Every gate point of a JUnit XML file, from its theodolite.* properties."""
    if not junit.exists():
        return ()
    points = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        loads = [name.rsplit(".", 1)[1] for name in properties if name.startswith("theodolite.verdict.")]
        for load in loads:
            points.append(
                Point(
                    case.get("name", "?"),
                    load,
                    properties.get(f"theodolite.baseline.{load}", "?"),
                    properties.get(f"theodolite.demand.{load}", "?"),
                    properties[f"theodolite.verdict.{load}"],
                )
            )
        if not loads:  # a point that errored before its comparison (unmeasured)
            outcome = (
                "error"
                if case.find("error") is not None
                else "failure"
                if case.find("failure") is not None
                else "skipped"
                if case.find("skipped") is not None
                else "?"
            )
            points.append(
                Point(
                    case.get("name", "?"),
                    case.get("name", "?").rpartition("load=")[2].rstrip("]"),
                    "?",
                    "-",
                    outcome,
                )
            )
    return tuple(points)


def run_gates(kind: str, index: int, out: Path, extra: list[str]) -> Run:
    results = out / f"{kind}-{index}"
    junit = out / f"{kind}-{index}.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "benchmarks",
        "-p",
        "no:cacheprovider",
        "-q",
        f"--theodolite-results={results}",
        f"--junitxml={junit}",
        *extra,
    ]
    print(f"## {kind} run {index}: {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    with open(out / f"{kind}-{index}.log", "w", encoding="utf-8") as log:
        code = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    run = Run(kind, index, time.monotonic() - started, code, points_of(junit))
    print(f"   exit {code}, {run.wall_s / 60:.1f} min, {len(run.regressions)} regression(s)", flush=True)
    return run


def report(runs: list[Run]) -> None:
    table: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    baselines: dict[tuple[str, str], str] = {}
    for run in runs:
        for point in run.points:
            key = (point.test.split("[")[0], point.load)
            baselines[key] = point.baseline
            mark = {"pass": "", "improvement": " (better)", "regression": " REGRESSION"}.get(
                point.verdict, f" {point.verdict}"
            )
            table[key][f"{run.kind[0]}{run.index}"] = f"{point.measured}{mark}"
    columns = [f"{r.kind[0]}{r.index}" for r in runs]
    print("\n| gate | load | baseline | " + " | ".join(columns) + " |")
    print("|---|---|---|" + "---|" * len(columns))
    for (test, load), cells in sorted(table.items(), key=lambda item: (item[0][0], int(item[0][1] or 0))):
        print(
            f"| {test} | {load} | {baselines[(test, load)]} | "
            + " | ".join(cells.get(c, "-") for c in columns)
            + " |"
        )
    for kind, label in (
        ("clean", "false alarms (unchanged code, a run with any regression)"),
        ("injected", "detections (injected regression, a run with any regression)"),
    ):
        chosen = [r for r in runs if r.kind == kind]
        if chosen:
            flagged = sum(1 for r in chosen if r.regressions)
            print(
                f"\n{label}: {flagged} of {len(chosen)}; wall time per run: "
                + ", ".join(f"{r.wall_s / 60:.1f} min" for r in chosen)
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clean", type=int, default=5, help="runs of unchanged code")
    parser.add_argument("--injected", type=int, default=5, help="runs with the injected UC1 regression")
    parser.add_argument("--hash-rounds", type=int, default=12, help="extra SHA-256 rounds per UC1 record")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression, e.g. uc1 (default: every gate)")
    parser.add_argument(
        "--theodolite-protocol",
        action="store_true",
        help="Theodolite's long protocol instead of the gates' own (the reference run)",
    )
    parser.add_argument("--out", type=Path, default=Path("gate-quality"), help="where runs keep their files")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    extra = (["-k", args.keyword] if args.keyword else []) + (
        THEODOLITE_PROTOCOL if args.theodolite_protocol else []
    )
    injected = [f"--theodolite-job-option=uc1-keys:extra_hash_rounds={args.hash_rounds}"]
    runs = [run_gates("clean", i + 1, args.out, extra) for i in range(args.clean)]
    runs += [run_gates("injected", i + 1, args.out, extra + injected) for i in range(args.injected)]
    report(runs)


if __name__ == "__main__":
    main()
