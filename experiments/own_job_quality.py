"""Does pull-request mode catch a small regression of a user's own job, gated with the defaults at loads the user
guessed? The click-stream example job (examples/clickstream) is copied into a scratch git repository with a gate
that sets nothing but its loads and the instances' CPU, committed (REF = HEAD), and gated in pull-request mode:
clean runs with the working tree unchanged, injected runs with a working-tree change that makes every record
pay for ``--hash-rounds`` chained SHA-256 hashes of its user (the same output).

    python experiments/own_job_quality.py --clean 3 --injected 3
    python experiments/own_job_quality.py --clean 0 --injected 1 --strategy baseline-guess+lower-bound
    python experiments/own_job_quality.py --loads 2000 5000 --hash-rounds 2
    python experiments/own_job_quality.py --calibrate --hash-rounds 2   # what the change costs a record
    python experiments/own_job_quality.py --clean 5 --injected 5 --no-paired-cost   # without the paired read
    python experiments/own_job_quality.py --judge own-job-quality   # the recorded paired reads, judged

``--calibrate`` measures what the change costs, apart from any gate: the job's transform, unchanged and changed,
over the same 400 000 click records in one local Spark session on one core (``noop`` sink, no Kafka), five
times each, alternating; it prints the median seconds of each and their ratio.

The table shows each run's REF demand beside the change's, the verdict and the CPU per record of the change
against REF (pull-request mode's own figure: at capacity under the capacity strategy, per offered record
otherwise), then each side's measured capacities per run and the false-alarm and detection rates. Nothing else
may run beside it (the gates measure CPU-limited instances).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from gate_quality import report, run_gates

from pytest_theodolite.core.outcomes import CostStatus
from pytest_theodolite.core.paired_cost import (
    PAIRED_COST_TOLERANCE,
    PairedCost,
    check_paired_cost,
    check_paired_cost_twice,
    paired_cost,
    rose_beyond,
)
from pytest_theodolite.report.quality import QualityRun

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "clickstream"

#: the line of the job the change edits, and what it becomes: every record hashes its user `rounds` times
ANCHOR = '    clicks = observed.where("_valid").withColumn("event_time", F.timestamp_millis("ts"))\n'
CHANGE = (
    ANCHOR
    + "    digest = F.col('user')\n"
    + "    for _ in range({rounds}):\n"
    + "        digest = F.sha2(digest, 256)\n"
    + "    clicks = clicks.where(F.length(digest) >= 0)  # always true: every record pays for the hashes\n"
)

GATE = '''"""A user's own gate: the defaults, the loads guessed."""

from clickstream import CLICKSTREAM_USERS

import pytest


@pytest.mark.theodolite(CLICKSTREAM_USERS, loads={loads!r}{instance_cpu})
def test_clickstream(theodolite_gate):
    theodolite_gate.check()
'''


def scratch_project(loads: list[int], instance_cpu: float | None) -> Path:
    """A git repository holding the example job and a gate with the defaults at `loads`, committed."""
    project = Path(tempfile.mkdtemp(prefix="own-job-quality-"))
    shutil.copy(EXAMPLE / "clickstream.py", project / "clickstream.py")
    cpu = "" if instance_cpu is None else f", instance_cpu={instance_cpu}"
    (project / "test_own_gate.py").write_text(GATE.format(loads=loads, instance_cpu=cpu))
    (project / "pytest.ini").write_text("[pytest]\ntheodolite_results = theodolite-results\n")
    if ANCHOR not in (project / "clickstream.py").read_text():
        raise SystemExit("examples/clickstream/clickstream.py no longer has the line this script edits")
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "."],
        [
            "git",
            "-c",
            "user.name=own-job",
            "-c",
            "user.email=own-job@example.invalid",
            "commit",
            "-qm",
            "job",
        ],
    ):
        subprocess.run(command, cwd=project, check=True)
    return project


def inject(project: Path, rounds: int) -> None:
    job = project / "clickstream.py"
    job.write_text(job.read_text().replace(ANCHOR, CHANGE.format(rounds=rounds)))


def capacities(results: Path) -> dict[str, dict[int, dict]]:
    """Each side's capacity measurements (their results-JSON entries) by instance count, from a run's results
    files; a measurement repeated at a higher rate replaces the first."""
    found: dict[str, dict[int, dict]] = {}
    for path in sorted(results.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        for measurement in data.get("capacity_measurements") or []:
            side = "REF" if "ref" in str(path.relative_to(results)).lower() else "change"
            found.setdefault(side, {})[measurement["instances"]] = measurement
    return found


def capacity_text(measurement: dict) -> str:
    """A capacity (records/s and interval, or why there is none) and its task CPU per record."""
    estimate, task_cpu = measurement.get("estimate"), measurement.get("task_cpu")
    text = (
        f"{estimate['records_per_s']:.0f} [{estimate['low']:.0f}, {estimate['high']:.0f}]"
        if estimate
        else measurement.get("status", "?")
    )
    return text if not task_cpu else f"{text}, task CPU {task_cpu['median_us']:.2f} us/record"


def task_cpu_change(found: dict[str, dict[int, dict]]) -> dict[int, float]:
    """Per instance count both sides measured with a task CPU figure: the change's over REF's."""
    ratios = {}
    for r, measurement in found.get("change", {}).items():
        ref = found.get("REF", {}).get(r, {}).get("task_cpu")
        if measurement.get("task_cpu") and ref:
            ratios[r] = measurement["task_cpu"]["median_us"] / ref["median_us"]
    return ratios


def recorded_per_record(sides: dict[str, dict]) -> dict[str, list[float]]:
    """Each side of a recorded paired read (`<benchmark>_paired_cost.json`'s "sides") as seconds per record,
    batch by batch in order, by the figure the gate judged: each batch's cycle (``cycle_s``), or in reads recorded
    before the gate judged cycles, its task CPU (``task_cpu_s``); batches without a figure left out, as the gate
    leaves them."""
    return {
        side: [
            seconds / batch[3]
            for batch, seconds in zip(read["batches"], read.get("cycle_s") or read["task_cpu_s"], strict=True)
            if seconds
        ]
        for side, read in sides.items()
    }


def recorded_cost(document: dict, first: int | None = None) -> PairedCost | None:
    """A recorded paired read's figure (a `<benchmark>_paired_cost*.json` document), recomputed from both sides'
    recorded batches (`first`: only each side's first that many); None where it measured none."""
    sides = document.get("sides") or {}
    if document.get("comparison") is None or set(sides) != {"ref", "change"}:
        return None
    per_record = {side: values[:first] for side, values in recorded_per_record(sides).items()}
    return paired_cost(per_record["ref"], per_record["change"])


def paired_costs(results: Path, first: int | None = None) -> list[str]:
    """Each benchmark's paired backlog read from a run's results files, as text: recomputed
    from both sides' recorded batches and judged at the paired read's default tolerance (runs recorded before it
    was judged are judged the same way), with its second read where one was made (a rise is read twice); `first`:
    only each side's first that many batches, as a shorter read would have measured."""
    texts = []
    for path in sorted(results.rglob("*_paired_cost.json")):
        document = json.loads(path.read_text())
        figure = recorded_cost(document, first)
        if figure is None:
            texts.append(f"not measured: {document.get('problem')}")
            continue
        judged = check_paired_cost(figure, PAIRED_COST_TOLERANCE)
        again = path.with_name(path.name.replace("_paired_cost.json", "_paired_cost_confirmation.json"))
        second = recorded_cost(json.loads(again.read_text()), first) if again.exists() else None
        read_again = ""
        if second is not None and rose_beyond(figure, PAIRED_COST_TOLERANCE):
            judged = check_paired_cost_twice(figure, second, PAIRED_COST_TOLERANCE)
            read_again = f"; read again {second.change:+.1%} over {second.pairs}" + (
                f", both together p {judged.p_value:.2g}" if second.change > PAIRED_COST_TOLERANCE else ""
            )
        verdict = {CostStatus.REGRESSION: "COST REGRESSION", CostStatus.NOT_COMPARED: "not judged"}.get(
            judged.status, "pass"
        )
        p_value = "" if figure.p_value is None else f", p {figure.p_value:.2g}"
        texts.append(
            f"{figure.change:+.1%} batch by batch over {figure.pairs} batches (medians "
            f"{figure.ref_median * 1e6:.2f} and {figure.change_median * 1e6:.2f} us{p_value}{read_again}): "
            f"{verdict} at {PAIRED_COST_TOLERANCE:.0%}"
        )
    return texts


def judge_recorded(outs: list[Path], first: int | None = None) -> None:
    """The paired reads of runs already recorded (each OUT's clean-N and injected-N), judged, and how many of
    each kind were flagged."""
    flagged: dict[str, list[bool]] = {"clean": [], "injected": []}
    for out in outs:
        for run in sorted(p for p in out.iterdir() if p.is_dir()):
            kind = run.name.split("-")[0]
            for text in paired_costs(run, first):
                print(f"{run}: {text}")
                if kind in flagged and not text.startswith("not measured"):
                    flagged[kind].append(text.endswith(f"COST REGRESSION at {PAIRED_COST_TOLERANCE:.0%}"))
    for kind, verdicts in flagged.items():
        print(f"{kind}: {sum(verdicts)} of {len(verdicts)} flagged")


def changed_source(source: str, rounds: int) -> str:
    """The click-stream job's `source` with the change: every record hashes its user `rounds` times."""
    if ANCHOR not in source:
        raise SystemExit("examples/clickstream/clickstream.py no longer has the line this script edits")
    return source.replace(ANCHOR, CHANGE.format(rounds=rounds))


def job_module(name: str, source: str) -> ModuleType:
    """`source` imported as module `name`: two versions of one job side by side in one process."""
    path = Path(tempfile.mkdtemp(prefix="own-job-module-")) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shutil.rmtree(path.parent, ignore_errors=True)
    return module


def calibrate(rounds: int, records: int = 400_000, repeats: int = 5) -> None:
    """The change's extra cost per record in the job's own transform (see the module's doc)."""
    import statistics

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    source = (EXAMPLE / "clickstream.py").read_text()
    jobs = {
        "unchanged": job_module("unchanged", source),
        "changed": job_module("changed", changed_source(source, rounds)),
    }
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        ids = spark.range(records).repartition(4)
        click = F.struct(
            F.concat(F.lit("user-"), (F.col("id") % 5000).cast("string")).alias("user"),
            F.element_at(
                F.array(*[F.lit(p) for p in jobs["unchanged"].PAGES]), (F.col("id") % 7 + 1).cast("int")
            ).alias("page"),
            (F.col("id") % 60_000).cast("int").alias("ms"),
            (F.col("id") % 250).cast("double").alias("price"),
            (F.lit(1_764_000_000_000) + F.col("id")).alias("ts"),
        )
        raw = ids.select(F.to_json(click).cast("binary").alias("value")).cache()
        raw.count()
        seconds: dict[str, list[float]] = {name: [] for name in jobs}
        for repeat in range(repeats + 1):  # the first round is warm-up (code generation, JIT)
            for name, job in jobs.items() if repeat % 2 == 0 else reversed(jobs.items()):
                frame = job.page_statistics(raw, window_size="10 seconds", watermark_delay="2 seconds")
                started = time.perf_counter()
                frame.write.format("noop").mode("overwrite").save()
                if repeat:
                    seconds[name].append(time.perf_counter() - started)
        unchanged, changed = (statistics.median(seconds[name]) for name in ("unchanged", "changed"))
        print(
            f"{records} records, {repeats} runs each: unchanged {unchanged:.2f} s, changed ({rounds} rounds) "
            f"{changed:.2f} s: {changed / unchanged - 1:+.1%} per record"
        )
    finally:
        spark.stop()


def run_gate(kind: str, index: int, project: Path, out: Path, extra: list[str]) -> QualityRun:
    """One pull-request run of the scratch project's gate against HEAD, then each side's capacities."""
    run = run_gates(kind, index, out, ["-rs", "--theodolite-compare-ref=HEAD", *extra], cwd=project, paths=())
    found = capacities(out / f"{kind}-{index}")
    for side, by_count in sorted(found.items()):
        print(
            f"   {side} capacities: "
            + "; ".join(f"{r}: {capacity_text(m)}" for r, m in sorted(by_count.items())),
            flush=True,
        )
    for text in paired_costs(out / f"{kind}-{index}"):
        print(f"   the paired read, both sides read together: change over REF {text}", flush=True)
    if ratios := task_cpu_change(found):
        print(
            "   task CPU per record, change over REF: "
            + "; ".join(f"{r}: {ratio - 1:+.1%}" for r, ratio in sorted(ratios.items())),
            flush=True,
        )
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clean", type=int, default=3, help="runs of unchanged code")
    parser.add_argument("--injected", type=int, default=3, help="runs with the working-tree change")
    parser.add_argument(
        "--hash-rounds", type=int, default=2, help="SHA-256 rounds the change adds per record"
    )
    parser.add_argument("--loads", type=int, nargs="+", default=[2000, 5000], help="the gate's loads (users)")
    parser.add_argument(
        "--instance-cpu",
        type=lambda text: None if text == "none" else float(text),
        default=0.25,
        help="the gate's instance_cpu, as the README's gate sets it; 'none': whole cores (the marker's default)",
    )
    parser.add_argument(
        "--strategy",
        help="--theodolite-strategy for these runs (default: the gate's own, the lag-trend search)",
    )
    parser.add_argument(
        "--no-paired-cost",
        dest="paired_cost",
        action="store_false",
        help="--theodolite-paired-cost=false: the sides read no backlog (they do by default)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("own-job-quality"), help="where runs keep their files"
    )
    parser.add_argument(
        "--calibrate", action="store_true", help="measure what the change costs a record, then stop"
    )
    parser.add_argument(
        "--judge",
        type=Path,
        nargs="+",
        metavar="OUT",
        help="judge the paired reads recorded in these --out directories, then stop",
    )
    parser.add_argument(
        "--first", type=int, default=None, help="with --judge: only each side's first N batches"
    )
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args.hash_rounds)
        return
    if args.judge:
        judge_recorded(args.judge, args.first)
        return
    # a SIGTERM ends the run through the finally below: the scratch repository does not outlive it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra = [f"--theodolite-strategy={args.strategy}"] if args.strategy else []
    if not args.paired_cost:
        extra.append("--theodolite-paired-cost=false")
    project = scratch_project(args.loads, args.instance_cpu)
    try:
        runs = [run_gate("clean", i + 1, project, out, extra) for i in range(args.clean)]
        if args.injected:
            inject(project, args.hash_rounds)
            runs += [run_gate("injected", i + 1, project, out, extra) for i in range(args.injected)]
    finally:
        shutil.rmtree(project, ignore_errors=True)
    report(runs, pull_request=True)


if __name__ == "__main__":
    main()
