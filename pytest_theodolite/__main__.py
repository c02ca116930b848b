"""``python -m pytest_theodolite``: ``analyse RESULTS_DIR`` re-judges recorded results (cli/analyse.py);
``points MODULE:BENCHMARK --point LOAD:INSTANCES ...`` measures chosen points under the gates' protocol, to
choose a gate's loads (cli/points.py); ``export RESULTS_DIR... --format bmf|github-action-benchmark`` gives
each point's demand, CPU per record and capacity to a dashboard (cli/export.py); ``history RESULTS_DIR...``
lines runs up by commit and has Apache Otava mark change points (cli/history.py); ``quality ... -- PYTEST_ARGS``
runs gates repeatedly, unchanged and with an injected regression, for their false-alarm and detection rates
(cli/quality.py); ``reference [--write DIR]`` prints or writes docs/reference/ (reference.py)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path


def reference_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_theodolite reference",
        description="the reference pages (options, ini keys, markers, fixtures, hooks) from the plugin's tables",
    )
    parser.add_argument("--write", type=Path, metavar="DIR", help="write them into DIR instead of printing")
    args = parser.parse_args(argv)
    from pytest_theodolite import reference

    if args.write is not None:
        for path in reference.write(args.write):
            print(path)
        return 0
    print("\n".join(reference.render().values()), end="")
    return 0


#: subcommand -> (``module:function`` that runs it with the arguments after it, what it does); ``analyse``'s
#: parser takes its own name too
SUBCOMMANDS = {
    "analyse": ("pytest_theodolite.cli.analyse:main", "re-judge recorded results from their raw series"),
    "points": (
        "pytest_theodolite.cli.points:main",
        "measure chosen points (--point LOAD:INSTANCES) or capacities (--capacity INSTANCES) of a benchmark",
    ),
    "quality": (
        "pytest_theodolite.cli.quality:main",
        "run gates repeatedly, unchanged and with an injected regression: false alarms and detections",
    ),
    "history": (
        "pytest_theodolite.cli.history:main",
        "line runs up by commit; Apache Otava marks change points",
    ),
    "export": (
        "pytest_theodolite.cli.export:main",
        "each point's demand, CPU per record and capacity for a dashboard",
    ),
    "reference": (
        "pytest_theodolite.__main__:reference_main",
        "print or write docs/reference/ from the plugin's own tables",
    ),
}


def usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in SUBCOMMANDS.items()]
    return (
        "usage: python -m pytest_theodolite SUBCOMMAND [ARGS...]   (or: pytest-theodolite SUBCOMMAND ...)\n\n"
        "subcommands (SUBCOMMAND --help for each one's arguments):\n" + "\n".join(lines) + "\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(usage())
        return 0 if argv else 2
    name = argv[0]
    if name not in SUBCOMMANDS:
        sys.stderr.write(f"python -m pytest_theodolite: unknown subcommand {name!r}\n\n{usage()}")
        return 2
    module, function = SUBCOMMANDS[name][0].split(":")
    run = getattr(importlib.import_module(module), function)
    return int(run(argv if name == "analyse" else argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
