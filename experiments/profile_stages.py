"""Where does a micro-batch's time go? Runs one gate sub-experiment of a use case with Spark's UI on, and
prints, for the last micro-batches, every stage's tasks as duration / JVM CPU (ms) from Spark's REST API, and
the micro-batches' median duration. A task whose duration far exceeds its CPU waits (Kafka, the CPU quota, a
Python worker -- whose CPU Spark does not count; profile that one with py-spy on the executor's
``pyspark_daemon`` process).

    python experiments/profile_stages.py --uc 4 --load 2 --instance-cpu 0.5

What it found, with dates: docs/lab-notes/experiments.md.

"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

import repo_paths  # noqa: F401 -- spark_jobs/ and benchmarks/ on sys.path
from gate_points import (  # experiments, beside this
    add_benchmark_argument,
    chosen_benchmark,
    gate_point_settings,
    median_batch_s,
)
from usecases import QUICK_WARMUP_EXECUTORS

from pytest_theodolite.core.scalability import Metric
from pytest_theodolite.engine.runner import ExperimentRunner, new_writer
from pytest_theodolite.engine.services import open_kafka, open_spark
from pytest_theodolite.engine.settings import TheodoliteSettings
from pytest_theodolite.infra.ports import free_port


def poll_stages(ui_port: int, snapshot: dict[str, Any], stop: threading.Event, stages: int) -> None:
    """Keep the last `stages` completed stages and their tasks (the UI goes with the session)."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    while not stop.wait(3):
        try:
            app = json.load(urllib.request.urlopen(base, timeout=2))[0]["id"]
            done = json.load(urllib.request.urlopen(f"{base}/{app}/stages?status=complete", timeout=5))
            last = sorted(done, key=lambda s: -s["stageId"])[:stages]
            snapshot["names"] = {s["stageId"]: s["name"] for s in last}
            snapshot["tasks"] = {
                s["stageId"]: json.load(
                    urllib.request.urlopen(
                        f"{base}/{app}/stages/{s['stageId']}/{s['attemptId']}/taskList?length=100", timeout=5
                    )
                )
                for s in last
            }
        except (OSError, ValueError):  # no session yet, or it is starting or stopping (an empty answer)
            continue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_benchmark_argument(parser)
    parser.add_argument("--load", type=int, required=True)
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--instance-cpu", type=float, default=0.25)
    parser.add_argument("--stages", type=int, default=8, help="how many of the last stages to print")
    args = parser.parse_args()
    benchmark, ui_port = chosen_benchmark(args), free_port()
    snapshot: dict[str, Any] = {}
    stop = threading.Event()
    poller = threading.Thread(target=poll_stages, args=(ui_port, snapshot, stop, args.stages), daemon=True)
    poller.start()
    settings = gate_point_settings(
        [args.load],
        [args.instances],
        args.instance_cpu,
        {**QUICK_WARMUP_EXECUTORS, "spark.ui.enabled": "true", "spark.ui.port": str(ui_port)},
    )
    results = Path(tempfile.mkdtemp(prefix="theodolite-profile-"))
    infra = TheodoliteSettings(max_instances=args.instances)
    with open_kafka(infra) as kafka, open_spark(infra) as spark:
        writer = new_writer(results, "profile", benchmark, settings, Metric.DEMAND, {})
        record = ExperimentRunner(benchmark, settings, kafka, spark, writer).run_sub_experiment(
            args.load, args.instances
        )
    stop.set()
    print(f"{benchmark.name} load={args.load} instances={args.instances}: {record.outcome.value}")
    print("stage: tasks as duration/JVM CPU (ms)")
    for stage_id, tasks in sorted(snapshot.get("tasks", {}).items()):
        cells = [f"{t['duration']}/{round(t['taskMetrics']['executorCpuTime'] / 1e6)}" for t in tasks]
        name = snapshot.get("names", {}).get(stage_id, "")
        print(f"{stage_id} ({name}): {' '.join(cells)}")
    median_s = median_batch_s(results, args.load, args.instances)
    if median_s is not None:
        print(f"micro-batch duration, median of the samples: {median_s:.2f} s")
    print(f"raw results: {results}")


if __name__ == "__main__":
    main()
