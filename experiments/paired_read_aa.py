"""Does pull-request mode's paired backlog read (``paired_cost``) hold still on unchanged code for the shipped
gates' jobs, not only for the click-stream example it was measured on?

Per round and gate, REF and the change are the same tree: both sides read a backlog at once exactly as
pull-request mode reads it (`PairedRead.read`: each side in its own driver process, one
instance each of one shared cluster, the default `BacklogPlan`, the gate's own settings from its marker), and the
figure is judged as the gate would judge it. A side's batches are kept in OUT/<round>/<benchmark>_paired_cost.json.

    python experiments/paired_read_aa.py --rounds 2                  # UC1-UC4
    python experiments/paired_read_aa.py --rounds 3 --gates uc2 uc4
    python experiments/paired_read_aa.py --rounds 2 --first alternate     # REF asked first, then the change
    python experiments/paired_read_aa.py --rounds 1 --read-cpu 0.25       # a quarter core (half is the default)
    python experiments/paired_read_aa.py --gates uc1 --rounds 6 --change-hash-rounds 4 --change-in even
    python experiments/paired_read_aa.py --gates uc3 --rounds 2 --change-hash-rounds 2
    python experiments/paired_read_aa.py --gates uc2 uc4 --rounds 2 --change-hash-rounds 2 --change-in even
    python experiments/paired_read_aa.py --gates uc1 --rounds 1 --legs 3 --batches 18 --fill-s 90 --read-every-batch
    python experiments/paired_read_aa.py --gates uc1 --rounds 1 --legs 3 --batches 12 --fill-s 70 --read-every-batch \
        --workers 4
    python experiments/paired_read_aa.py --gates uc1 --rounds 2 --reads 3 --read-every-batch   # the same drivers
    python experiments/paired_read_aa.py --gates uc1 uc2 --rounds 1 --backlog-margin 0   # the fill of before 8efe349

With ``--change-hash-rounds N`` the change side reads the chosen gates' jobs from a scratch worktree whose jobs
hash every record N more times (gate_quality.py's injected regression): A/B rounds, in every round or (``--change-in
even``) in every second one, the others A/A.

Nothing else may run beside it (the instances are CPU-limited).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from pathlib import Path

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
import test_scalability_gates
from gate_quality import injected_tree

from pytest_theodolite.engine.backlog_read import BacklogPlan
from pytest_theodolite.engine.markers import gate_spec
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.process import terminate_as_interrupt
from pytest_theodolite.pull_request.experiment import start_paired_experiment
from pytest_theodolite.pull_request.paired_read import PairedRead
from pytest_theodolite.pull_request.side_spec import spec_for
from pytest_theodolite.pull_request.target import CompareTarget
from pytest_theodolite.report.paired import paired_read_note
from pytest_theodolite.store.results import experiment_id

ROOT = Path(__file__).resolve().parents[1]


def gates(names: list[str]) -> dict[str, object]:
    """The shipped gates' test functions whose name holds one of `names` (uc1 ... uc4)."""
    found = {
        name: function
        for name, function in vars(test_scalability_gates).items()
        if name.startswith("test_") and any(f"_{wanted}_" in f"{name}_" for wanted in names)
    }
    if not found:
        raise SystemExit(f"no gate in benchmarks/test_scalability_gates.py matches {names}")
    return found


def read_once(
    function: object,
    kafka,
    spark,
    results: Path,
    first: str,
    plan: BacklogPlan,
    change_root: Path = ROOT,
    reads: int = 1,
) -> str:
    """Both sides of one gate read their backlogs at once (the change's job imported from `change_root`); the
    report's line on it. With `reads` above 1 the same two side processes read again, each read after the first
    asking the other side first, and each read's batches are kept as ``..._paired_cost_read<N>.json``."""
    marker = function.pytestmark[0]  # type: ignore[attr-defined]
    spec = gate_spec(marker.args, {**marker.kwargs, "paired_cost": True}, {}, {}, pull_request=True)
    benchmark, settings = spec.benchmark, spec.settings
    roots = {"ref": ROOT, "change": change_root}
    target = CompareTarget("HEAD", "0" * 40, ROOT, ROOT)
    specs = {
        side: spec_for(
            side, root, benchmark, settings, kafka, spark, results / side, experiment_id(benchmark.name), {}
        )
        for side, root in roots.items()
    }
    experiment = start_paired_experiment(benchmark, settings, target, specs, None)
    lines = []
    try:
        for read in range(1, reads + 1):
            paired_read = PairedRead(benchmark, settings, experiment.sides, plan)  # each read a fresh one
            paired_read.read(first if read % 2 else {"ref": "change", "change": "ref"}[first])
            lines.append(paired_read_note(paired_read.result()) or "not read")
            if reads > 1:
                written = results / f"{experiment_id(benchmark.name)}_paired_cost.json"
                written.rename(written.with_name(f"{written.stem}_read{read}.json"))
    finally:
        experiment.close()
    return "\n  ".join(lines)


def executor_slots() -> set[tuple[str, str, str]]:
    """(application, executor id, worker pid) of every executor JVM running now: which worker's share it runs in."""
    found = set()
    for status in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = status.read_bytes().split(b"\0")
            if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" not in words:
                continue
            # the worker that launched it: its parent (a cgroup namespace may show every cgroup as "/")
            worker = (status.parent / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue  # gone meanwhile
        options = {
            words[i].decode(): words[i + 1].decode()
            for i in range(len(words) - 1)
            if words[i].startswith(b"--")
        }
        found.add((options.get("--app-id", "?"), options.get("--executor-id", "?"), worker))
    return found


@contextlib.contextmanager
def watching_slots(seen: set[tuple[str, str, str]]):
    """Adds every executor's slot seen, every second, to `seen` while the block runs."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(1.0):
            seen.update(executor_slots())

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


def main() -> None:
    # SIGTERM (kill, timeout) ends the run through its finally blocks as Ctrl-C does: no worktree or JVM left
    terminate_as_interrupt()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gates", nargs="+", default=["uc1", "uc2", "uc3", "uc4"])
    parser.add_argument("--out", type=Path, default=None, help="where the rounds keep their batches")
    parser.add_argument(
        "--first",
        choices=("ref", "change", "alternate"),
        default="ref",
        help="the side asked first, whose session starts first (both read from the same moment; pull-request mode "
        "asks REF); alternate: REF in odd rounds",
    )
    parser.add_argument(
        "--read-cpu",
        type=float,
        default=BacklogPlan.instance_cpu,
        help="each reading instance's CPU limit in cores (default: the plan's half core)",
    )
    parser.add_argument(
        "--change-hash-rounds",
        type=int,
        default=0,
        help="the change side's jobs hash every record this many more times (0: A/A)",
    )
    parser.add_argument(
        "--change-in",
        choices=("all", "even"),
        default="all",
        help="with --change-hash-rounds: the rounds that read the change (even: rounds 2, 4, ...; the others A/A)",
    )
    parser.add_argument(
        "--read-every-batch",
        action="store_true",
        help="read all the plan's batches even where a pass is certain earlier (reads to replay with "
        "paired_read_stop.py)",
    )
    parser.add_argument(
        "--legs",
        type=int,
        default=BacklogPlan.legs,
        help="read in this many legs, each side's executor replaced by a new JVM between them",
    )
    parser.add_argument(
        "--batches",
        type=int,
        default=BacklogPlan.batches,
        help="measured batches a side reads, over all legs",
    )
    parser.add_argument(
        "--fill-s", type=float, default=BacklogPlan.fill_s, help="seconds each side fills at most"
    )
    parser.add_argument(
        "--backlog-margin",
        type=float,
        default=BacklogPlan.backlog_margin,
        help="the fill ends once the backlog holds this many times what the read takes (0: every fill takes "
        "--fill-s, as before 2026-12-05)",
    )
    parser.add_argument(
        "--reads",
        type=int,
        default=1,
        help="reads by the same two side processes (driver JVMs) in each round, the side asked first alternating",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="the cluster's one-core workers: with more than two, a replaced executor may start on another's share",
    )
    args = parser.parse_args()
    plan = BacklogPlan(
        instance_cpu=args.read_cpu,
        stop_when_certain=not args.read_every_batch,
        legs=args.legs,
        batches=args.batches,
        fill_s=args.fill_s,
        backlog_margin=args.backlog_margin,
    )
    chosen = gates(args.gates)
    # the gate test_ucN_... measures spark_jobs/ucN.py
    jobs = {name: name.split("_")[1] for name in chosen}
    out = args.out or Path(tempfile.mkdtemp(prefix="theodolite-paired-aa-"))
    started = time.monotonic()
    settings = TheodoliteSettings(max_instances=args.workers, results_dir=out)
    with contextlib.ExitStack() as stack:
        injected = (
            stack.enter_context(injected_tree(args.change_hash_rounds, tuple(jobs[name] for name in chosen)))
            if args.change_hash_rounds
            else ROOT
        )
        kafka = stack.enter_context(open_kafka(settings))
        spark = stack.enter_context(open_spark(settings))
        for round_ in range(1, args.rounds + 1):
            changed = args.change_hash_rounds > 0 and (args.change_in == "all" or round_ % 2 == 0)
            for name, function in chosen.items():
                began = time.monotonic()
                first = args.first if args.first != "alternate" else ("ref", "change")[(round_ - 1) % 2]
                change_root = injected if changed else ROOT
                with watching_slots(set()) as slots:
                    line = read_once(
                        function, kafka, spark, out / f"round-{round_}", first, plan, change_root, args.reads
                    )
                what = f"change +{args.change_hash_rounds} hashes" if changed else "A/A"
                print(
                    f"round {round_} {name} ({what}), {first} first ({time.monotonic() - began:.0f} s): {line}",
                    flush=True,
                )
                for application, executor, worker in sorted(slots):
                    print(f"  {application} executor {executor} on the worker of pid {worker}", flush=True)
    print(f"wall time {time.monotonic() - started:.0f} s; batches: {out}")


if __name__ == "__main__":
    main()
