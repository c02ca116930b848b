"""How far can the shipped gates be trusted? Runs them repeatedly against the committed baselines and prints,
per gate point and run, the baseline, the measured demand and the verdict, then the false-alarm rate (runs
of unchanged code with a regression), the detection rate (runs with an injected regression that were flagged)
and the wall time of each run. (Any gate's quality, with a regression of the user's choosing, is measured by the
installed ``python -m pytest_theodolite quality``; this script keeps the shipped gates' UC1 injection.)

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
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_theodolite.cli.quality import run_once
from pytest_theodolite.infra.process import terminate_as_interrupt
from pytest_theodolite.report.quality import QualityRun, quality_report

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


def run_gates(
    kind: str,
    index: int,
    out: Path,
    extra: list[str],
    cwd: Path = ROOT,
    paths: tuple[str, ...] = ("benchmarks",),
) -> QualityRun:
    """One pytest run of the gates under `paths` in `cwd` (the quality command's run), its files under `out`."""
    return run_once(kind, index, out, [*paths, *extra], cwd)


def report(runs: list[QualityRun], pull_request: bool = False) -> None:
    print("\n" + quality_report(runs, pull_request))


COMPARE: list[str] = []  # the REF of --compare-ref, when given


@contextmanager
def injected_tree(rounds: int, jobs: tuple[str, ...] = ("uc1",)) -> Iterator[Path]:
    """A scratch worktree of HEAD whose `jobs` (spark_jobs/<job>.py: uc1 ... uc4) hash every record `rounds` times
    unless told otherwise."""
    parent = Path(tempfile.mkdtemp(prefix="gate-quality-injected-"))
    tree = parent / "tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], check=True
    )
    try:
        for name in jobs:
            job = tree / "spark_jobs" / f"{name}.py"
            text = job.read_text() if job.is_file() else ""
            if "extra_hash_rounds: int = 0," not in text:
                raise SystemExit(
                    f"spark_jobs/{name}.py has no extra_hash_rounds default for this script to edit"
                )
            job.write_text(text.replace("extra_hash_rounds: int = 0,", f"extra_hash_rounds: int = {rounds},"))
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(parent, ignore_errors=True)


def main() -> None:
    # SIGTERM (kill, timeout) ends the run through its finally blocks as Ctrl-C does: no worktree or JVM left
    terminate_as_interrupt()
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
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more pytest argument for every run, e.g. --pytest-arg=--theodolite-ref-below=false (repeatable)",
    )
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    extra = (["-k", args.keyword] if args.keyword else []) + (
        THEODOLITE_PROTOCOL if args.theodolite_protocol else []
    )
    if args.strategy:
        extra += [f"--theodolite-strategy={args.strategy}"]
    extra += args.pytest_arg
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
