"""``python -m pytest_theodolite quality [--clean N] [--injected N] (--job-option B:K=V | --patch FILE)
[--compare-ref REF] [--out DIR] -- PYTEST_ARGS...``: how far a gate can be trusted. Runs the gates N times on
unchanged code and N times with an injected regression, then prints every run's points side by side, the
false-alarm rate and the detection rate with their Clopper-Pearson intervals, and each run's wall time.

The regression is a job option (``--job-option uc1-keys:extra_hash_rounds=12``, given to the injected runs as
``--theodolite-job-option``), or a patch applied to a scratch worktree of HEAD (``--patch slower.diff``), in
which the injected runs run, their job imported from that worktree. In pull-request mode (``--compare-ref``)
a job option would reach both sides, so the regression must be a patch: the injected runs compare the patched
worktree with REF, the clean runs the working tree with REF. REF is resolved to its commit once.

Each run runs alone (the gates measure CPU-limited instances: nothing else may run beside them); its log,
JUnit XML and raw results stay under --out. Bad input exits 2 before anything runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from pytest_theodolite.report.quality import QualityRun, points_of, quality_report

EXIT_OK, EXIT_INTERRUPTED, EXIT_BAD_INPUT = 0, 130, 2


class QualityError(ValueError):
    """Bad input: said before anything runs."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_theodolite quality",
        description=(__doc__ or "").split("\n\n")[0].split(": ", 1)[-1],
        usage="%(prog)s [options] -- [PYTEST_ARGS ...]",
    )
    parser.add_argument(
        "--clean", type=int, default=5, metavar="N", help="runs of unchanged code (default 5)"
    )
    parser.add_argument(
        "--injected", type=int, default=5, metavar="N", help="runs with the injected regression (default 5)"
    )
    parser.add_argument(
        "--job-option",
        action="append",
        default=[],
        metavar="BENCHMARK:KEY=VALUE",
        help="the regression as a job option of the injected runs (repeatable; stored-baseline mode)",
    )
    parser.add_argument(
        "--patch", type=Path, metavar="FILE", help="the regression as a patch (git apply) to HEAD"
    )
    parser.add_argument(
        "--compare-ref", metavar="REF", help="pull-request mode against REF (e.g. HEAD, origin/main)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("theodolite-quality"), help="where each run keeps its files"
    )
    parser.add_argument("pytest_args", nargs="*", metavar="PYTEST_ARGS", help="after --: what pytest runs")
    return parser


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise QualityError(f"git {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def check_request(args: argparse.Namespace) -> None:
    """What cannot work, said before anything runs."""
    if args.clean < 0 or args.injected < 0 or args.clean + args.injected == 0:
        raise QualityError(
            "--clean and --injected take run counts >= 0, and at least one run must be asked for"
        )
    if args.injected and not (args.job_option or args.patch):
        raise QualityError(
            "the injected runs need a regression: --job-option BENCHMARK:KEY=VALUE (a job option that makes the "
            "job slower) or --patch FILE (a diff to apply to HEAD); or ask for --injected 0"
        )
    if args.job_option and args.patch:
        raise QualityError("give the regression as --job-option or as --patch, not both")
    for option in args.job_option:
        benchmark, _, assignment = option.partition(":")
        if not benchmark or "=" not in assignment or assignment.startswith("="):
            raise QualityError(
                f"--job-option {option!r}: expected BENCHMARK:KEY=VALUE, e.g. uc1-keys:extra_hash_rounds=12"
            )
    if args.compare_ref and args.job_option and args.injected:
        raise QualityError(
            "in pull-request mode a job option reaches both sides (REF's too), so it injects nothing: give the "
            "regression as --patch FILE, which only the injected runs' worktree gets"
        )
    if args.patch is not None and not args.patch.is_file():
        raise QualityError(f"--patch {str(args.patch)!r}: no such file")


@contextmanager
def patched_worktree(repo: Path, patch: Path) -> Iterator[Path]:
    """A scratch worktree of HEAD with `patch` applied; removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="theodolite-quality-"))
    tree = parent / "tree"
    _git(repo, "worktree", "add", "-q", "--detach", str(tree), "HEAD")
    try:
        _git(tree, "apply", str(patch.resolve()))
        if not _git(tree, "status", "--porcelain"):
            raise QualityError(f"--patch {str(patch)!r} changed nothing in HEAD's tree")
        yield tree
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(parent, ignore_errors=True)


def job_path(tree: Path) -> str:
    """PYTHONPATH for runs in a scratch worktree: its root and a src/ layout's folder come before an installed
    (or editable) copy of the user's package, so the patched job is the one imported."""
    entries = [str(tree), *([str(tree / "src")] if (tree / "src").is_dir() else [])]
    existing = os.environ.get("PYTHONPATH")
    return os.pathsep.join(entries + ([existing] if existing else []))


def run_once(
    kind: str, index: int, out: Path, pytest_args: Sequence[str], cwd: Path, env: dict[str, str] | None = None
) -> QualityRun:
    """One pytest run, its log, JUnit XML and results under `out`."""
    results, junit = out / f"{kind}-{index}", out / f"{kind}-{index}.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        *pytest_args,
        "-p",
        "no:cacheprovider",
        "-q",
        f"--theodolite-results={results}",
        f"--junitxml={junit}",
    ]
    print(f"## {kind} run {index}: {' '.join(command[1:])}", flush=True)
    started = time.monotonic()
    with open(out / f"{kind}-{index}.log", "w", encoding="utf-8") as log:
        code = subprocess.run(
            command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False
        ).returncode
    run = QualityRun(kind, index, time.monotonic() - started, code, points_of(junit))
    verdict = (
        "failed the gate" if run.flagged else "did not fail the gate" if run.counted else run.why_not_counted
    )
    print(f"   exit {code}, {run.wall_s / 60:.1f} min, {verdict}", flush=True)
    return run


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    repo = Path.cwd()
    out = args.out.resolve()
    runs: list[QualityRun] = []
    try:
        with ExitStack() as stack:
            check_request(args)
            pytest_args = list(args.pytest_args)
            if args.compare_ref:
                commit = _git(repo, "rev-parse", "--verify", f"{args.compare_ref}^{{commit}}")
                pytest_args.append(f"--theodolite-compare-ref={commit}")
            injected_cwd, injected_env = repo, None
            injected_args = pytest_args + [f"--theodolite-job-option={option}" for option in args.job_option]
            if args.patch is not None and args.injected:
                # made (and the patch checked) before the clean runs: a patch that does not apply costs nothing
                tree = stack.enter_context(patched_worktree(repo, args.patch))
                # the same place in the worktree as here: a gate in a subfolder runs from its copy
                injected_cwd = tree / repo.relative_to(_git(repo, "rev-parse", "--show-toplevel"))
                injected_env = {**os.environ, "PYTHONPATH": job_path(tree)}
            out.mkdir(parents=True, exist_ok=True)
            for i in range(args.clean):
                runs.append(run_once("clean", i + 1, out, pytest_args, repo))
            for i in range(args.injected):
                runs.append(run_once("injected", i + 1, out, injected_args, injected_cwd, injected_env))
    except QualityError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("\ninterrupted: the runs that ended so far", file=sys.stderr)
        _report(runs, out, bool(args.compare_ref))
        return EXIT_INTERRUPTED
    _report(runs, out, bool(args.compare_ref))
    return EXIT_OK


def _report(runs: Sequence[QualityRun], out: Path, pull_request: bool) -> None:
    text = quality_report(runs, pull_request)
    print("\n" + text)
    if out.is_dir():
        (out / "quality.md").write_text(text + "\n", encoding="utf-8")
