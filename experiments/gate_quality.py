"""How far can the shipped gates be trusted? Runs them repeatedly against the committed baselines and prints,
per gate point and run, the baseline, the measured demand and the verdict, then the false-alarm rate (runs
of unchanged code with a regression), the detection rate (runs with an injected regression that were flagged)
and the wall time of each run.

    python experiments/gate_quality.py --clean 5 --injected 5
    python experiments/gate_quality.py --clean 0 --injected 3 --hash-rounds 12 -k uc1
    python experiments/gate_quality.py --clean 1 --injected 0 -k "uc1 or uc2" --theodolite-protocol
    python experiments/gate_quality.py --clean 5 --injected 5 -k uc1 --compare-ref HEAD
    python experiments/gate_quality.py --clean 5 --injected 5 -k uc1 --compare-ref HEAD --strategy capacity

The injected regression needs no code edit: UC1's job option ``extra_hash_rounds`` (spark_jobs/uc1.py) makes
every record pay for that many chained SHA-256 hashes (12 rounds: about +50 % CPU per record in the job's
transform, measured on 1 M records in local mode). ``--theodolite-protocol`` runs Theodolite's own protocol
instead of the gates' (60 s warm-up under the limit, 300 s measured, OLS lag trend only), the long reference
the fast verdicts are compared with. Each run writes its raw results and a JUnit XML under --out; nothing
else may run beside it (the gates measure CPU-limited instances).

``--compare-ref REF`` measures pull-request mode: clean runs compare the working tree with REF (REF = HEAD:
the same code on both sides); injected runs compare a scratch worktree of HEAD whose UC1 job hashes every
record ``--hash-rounds`` times by default -- a code change, as a pull request would bring -- with REF. The
table then shows REF's demand beside the change's, and the CPU-per-record difference.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    baseline: str  # pull-request mode: REF's demand
    measured: str
    verdict: str
    cpu_change: str = ""  # the CPU per record relative to the baseline's (pull-request mode: REF's)


@dataclass(frozen=True)
class Run:
    kind: str  # "clean" or "injected"
    index: int
    wall_s: float
    exit_code: int
    points: tuple[Point, ...]

    @property
    def complete(self) -> bool:
        """The session ran to its end: gates passed (0), failed (1) or were not comparable (7). An interrupted
        run (2), an internal or usage error (3, 4) or no gates (5) measured only part of the points."""
        return self.exit_code in COMPLETE_EXIT_CODES

    @property
    def regressions(self) -> list[Point]:
        """Points that failed the gate: a demand regression or a CPU per record beyond the cost tolerance."""
        return [p for p in self.points if p.verdict in ("regression", "cost-regression")]

    @property
    def cost_regressions(self) -> list[Point]:
        return [p for p in self.points if p.verdict == "cost-regression"]


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
                    properties.get(
                        f"theodolite.ref.{load}", properties.get(f"theodolite.baseline.{load}", "?")
                    ),
                    # "<=2": passed at the reference's demand, fewer instances not run
                    ("<=" if properties.get(f"theodolite.demand_at_most.{load}") == "true" else "")
                    + properties.get(f"theodolite.demand.{load}", "?"),
                    properties[f"theodolite.verdict.{load}"],
                    properties.get(f"theodolite.cpu_change.{load}", ""),
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


def run_gates(
    kind: str,
    index: int,
    out: Path,
    extra: list[str],
    cwd: Path = ROOT,
    paths: tuple[str, ...] = ("benchmarks",),
) -> Run:
    """One pytest run of the gates under `paths` in `cwd`, its log, results and JUnit XML under `out`."""
    results = out / f"{kind}-{index}"
    junit = out / f"{kind}-{index}.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        *paths,
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
        code = subprocess.run(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    run = Run(kind, index, time.monotonic() - started, code, points_of(junit))
    print(f"   exit {code}, {run.wall_s / 60:.1f} min, {len(run.regressions)} regression(s)", flush=True)
    return run


def report(runs: list[Run], pull_request: bool = False) -> None:
    """The points of every run side by side, then the rates. In pull-request mode each cell shows that run's
    REF demand beside the change's (REF is measured anew in every run, and differs between runs on an edge);
    otherwise the stored baseline's demand, the same for all runs, has a column of its own."""
    table: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    baselines: dict[tuple[str, str], str] = {}
    for run in runs:
        for point in run.points:
            key = (point.test.split("[")[0], point.load)
            baselines[key] = point.baseline
            mark = {
                "pass": "",
                "improvement": " (better)",
                "regression": " REGRESSION",
                "cost-regression": " COST REGRESSION",
            }.get(point.verdict, f" {point.verdict}")
            cpu = f" cpu {float(point.cpu_change):+.0%}" if point.cpu_change else ""
            demands = f"{point.baseline} -> {point.measured}" if pull_request else point.measured
            table[key][f"{run.kind[0]}{run.index}"] = f"{demands}{mark}{cpu}"
    columns = [f"{r.kind[0]}{r.index}" for r in runs]
    head = "| gate | load | " if pull_request else "| gate | load | baseline | "
    print("\n" + head + " | ".join(columns) + " |")
    print("|---|---|" + ("" if pull_request else "---|") + "---|" * len(columns))
    for (test, load), cells in sorted(table.items(), key=lambda item: (item[0][0], int(item[0][1] or 0))):
        reference = "" if pull_request else f"{baselines[(test, load)]} | "
        print(f"| {test} | {load} | {reference}" + " | ".join(cells.get(c, "-") for c in columns) + " |")
    for kind, label in (
        ("clean", "false alarms (unchanged code, a run with any regression)"),
        ("injected", "detections (injected regression, a run with any regression)"),
    ):
        chosen = [r for r in runs if r.kind == kind and r.complete]
        incomplete = [r for r in runs if r.kind == kind and not r.complete]
        if chosen:
            flagged = sum(1 for r in chosen if r.regressions)
            by_cost = sum(1 for r in chosen if r.cost_regressions)
            print(
                f"\n{label}: {flagged} of {len(chosen)} ({by_cost} with a cost regression); wall time per run: "
                + ", ".join(f"{r.wall_s / 60:.1f} min" for r in chosen)
            )
        if incomplete:
            print(
                f"not counted ({kind}, did not run to its end): "
                + ", ".join(f"{r.kind[0]}{r.index} (exit {r.exit_code})" for r in incomplete)
            )


COMPARE: list[str] = []  # the REF of --compare-ref, when given
COMPLETE_EXIT_CODES = (0, 1, 7)


@contextmanager
def injected_tree(rounds: int) -> Iterator[Path]:
    """A scratch worktree of HEAD whose UC1 job hashes every record `rounds` times unless told otherwise."""
    parent = Path(tempfile.mkdtemp(prefix="gate-quality-injected-"))
    tree = parent / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], check=True
    )
    try:
        job = tree / "spark_jobs" / "uc1.py"
        text = job.read_text()
        if "extra_hash_rounds: int = 0," not in text:
            raise SystemExit(
                "spark_jobs/uc1.py no longer has the extra_hash_rounds default this script edits"
            )
        job.write_text(text.replace("extra_hash_rounds: int = 0,", f"extra_hash_rounds: int = {rounds},"))
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(parent, ignore_errors=True)


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
    parser.add_argument(
        "--compare-ref",
        metavar="REF",
        help="pull-request mode against REF (e.g. HEAD); injected runs are a code change in a scratch worktree",
    )
    parser.add_argument("--out", type=Path, default=Path("gate-quality"), help="where runs keep their files")
    parser.add_argument(
        "--strategy",
        help="the gates' search strategy for these runs, e.g. capacity (default: each gate's own)",
    )
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    extra = (["-k", args.keyword] if args.keyword else []) + (
        THEODOLITE_PROTOCOL if args.theodolite_protocol else []
    )
    if args.strategy:
        extra += [f"--theodolite-strategy={args.strategy}"]
    if args.compare_ref:
        # resolved once: a scratch worktree's HEAD is the same commit, and REF must not move between runs
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{args.compare_ref}^{{commit}}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        COMPARE.append(commit)
        extra += [f"--theodolite-compare-ref={commit}"]
    runs = [run_gates("clean", i + 1, args.out, extra) for i in range(args.clean)]
    if args.compare_ref and args.injected:
        with injected_tree(args.hash_rounds) as tree:
            runs += [run_gates("injected", i + 1, args.out, extra, cwd=tree) for i in range(args.injected)]
    else:
        injected = [f"--theodolite-job-option=uc1-keys:extra_hash_rounds={args.hash_rounds}"]
        runs += [run_gates("injected", i + 1, args.out, extra + injected) for i in range(args.injected)]
    report(runs, pull_request=bool(COMPARE))


if __name__ == "__main__":
    main()
