"""``python -m theodolite_generator``: send a Theodolite workload for a while and say whether it reached its target.

    python -m theodolite_generator --bootstrap-servers 127.0.0.1:9092 --topic input --keys 10000 --period-ms 1000 \\
        --duration-s 60
    python -m theodolite_generator ... --children 4 --depth 3 --config-topic configuration     # UC4: 64 sensors

Client security settings come from ``--client-config FILE`` (Java properties, like Kafka's
``--command-config``) and/or ``-X name=value``; they are never printed. Exit codes: 0 the mean achieved rate
after ``--warmup-s`` was within 2 % of the target, 1 it fell short, 2 the workload was refused before
anything was produced.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from theodolite_generator.producer import MEASURED_RATE_PER_PROCESS, LoadGenerator, RateSummary
from theodolite_generator.workload import Workload, WorkloadError

EXIT_OK, EXIT_SHORT_OF_TARGET, EXIT_REFUSED = 0, 1, 2


def read_properties(path: Path) -> dict[str, str]:
    settings: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise WorkloadError(f"{path}: a line has no '=' (expected name=value); fix the properties file")
        settings[name.strip()] = value.strip()
    return settings


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m theodolite_generator", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--bootstrap-servers", required=True, help="HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--topic", required=True, help="existing topic the records go to")
    parser.add_argument(
        "--keys", type=int, help="number of sensors s_0..s_{N-1} (not with --children/--depth)"
    )
    parser.add_argument("--period-ms", type=int, default=1000, help="ms between two records of one key")
    parser.add_argument("--duration-s", type=float, required=True, help="how long to send")
    parser.add_argument("--seed", type=int, default=0, help="seed of the reproducible values")
    parser.add_argument("--children", type=int, help="UC4: members per sensor group")
    parser.add_argument("--depth", type=int, help="UC4: levels of nested groups (children**depth sensors)")
    parser.add_argument("--config-topic", help="UC4: existing topic for the sensor registry")
    parser.add_argument("--processes", type=int, help="worker processes (default: as many as the load needs)")
    parser.add_argument(
        "--max-rate-per-process",
        type=float,
        default=MEASURED_RATE_PER_PROCESS,
        help="records/s one process sustains here (default: the figure measured on the "
        "development machine); loads above processes x this are refused",
    )
    parser.add_argument("--warmup-s", type=int, default=1, help="first seconds left out of the verdict")
    parser.add_argument("--client-config", type=Path, help="properties file of librdkafka client settings")
    parser.add_argument(
        "-X",
        dest="client_settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one librdkafka client setting, repeatable",
    )
    return parser.parse_args(argv)


def build_workload(args: argparse.Namespace) -> Workload:
    if args.children is not None or args.depth is not None:
        if args.children is None or args.depth is None:
            raise WorkloadError("a hierarchy needs both --children and --depth")
        workload = Workload.for_hierarchy(args.children, args.depth, args.period_ms, args.seed)
        if args.keys is not None and args.keys != workload.keys:
            raise WorkloadError(
                f"--keys {args.keys} contradicts the hierarchy's {workload.keys} sensors; leave --keys out"
            )
        return workload
    if args.keys is None:
        raise WorkloadError("say how many keys to send: --keys N (or --children C --depth D for UC4)")
    return Workload(args.keys, args.period_ms, args.seed)


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    settings = read_properties(args.client_config) if args.client_config else {}
    for item in args.client_settings:
        name, sep, value = item.partition("=")
        if not sep:
            raise WorkloadError("-X takes NAME=VALUE (e.g. -X security.protocol=SASL_SSL)")
        settings[name.strip()] = value
    return settings


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.duration_s <= 0:
            raise WorkloadError(f"--duration-s must be positive, got {args.duration_s}")
        generator = LoadGenerator(
            args.bootstrap_servers,
            args.topic,
            build_workload(args),
            processes=args.processes,
            client_config=client_settings(args),
            config_topic=args.config_topic,
            max_rate_per_process=args.max_rate_per_process,
        )
        generator.start()
    except WorkloadError as exc:
        print(f"generator: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    try:
        time.sleep(args.duration_s)
    except KeyboardInterrupt:
        print("generator: interrupted, stopping", file=sys.stderr)
    finally:
        generator.stop()
    summary = RateSummary.of(generator.achieved_rates(), generator.target_rate, skip_s=args.warmup_s)
    totals = generator.totals
    print(
        f"target {summary.target_rate:,.0f} records/s from {generator.process_count} process(es); achieved "
        f"mean {summary.mean_rate:,.0f} (min {summary.min_rate:,.0f}, max {summary.max_rate:,.0f}) over "
        f"{summary.seconds} s after {args.warmup_s} s warm-up; {totals.acknowledged:,} of {totals.produced:,} "
        f"records acknowledged, {totals.failed:,} failed"
    )
    if totals.first_error:
        print(f"first client error: {totals.first_error}", file=sys.stderr)
    if not summary.ok:
        print(
            f"generator: achieved rate {summary.shortfall:.1%} short of target (more than "
            f"{summary.tolerance:.0%})",
            file=sys.stderr,
        )
        return EXIT_SHORT_OF_TARGET
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
