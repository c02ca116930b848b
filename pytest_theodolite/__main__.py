"""``python -m pytest_theodolite``: ``analyse RESULTS_DIR`` re-judges recorded results (cli/analyse.py);
``points MODULE:BENCHMARK --point LOAD:INSTANCES ...`` measures chosen points under the gates' protocol, to
choose a gate's loads (cli/points.py); ``export RESULTS_DIR... --format bmf|github-action-benchmark`` gives
each point's demand, CPU per record and capacity to a dashboard (cli/export.py); ``history RESULTS_DIR...``
lines runs up by commit and has Apache Otava mark change points (cli/history.py); ``quality ... -- PYTEST_ARGS``
runs gates repeatedly, unchanged and with an injected regression, for their false-alarm and detection rates
(cli/quality.py); ``reference [--write DIR]`` prints or writes docs/reference/ (reference.py)."""

from __future__ import annotations

import argparse
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["reference"]:
        return reference_main(argv[1:])
    if argv[:1] == ["points"]:
        from pytest_theodolite.cli.points import main as points

        return points(argv[1:])
    if argv[:1] == ["quality"]:
        from pytest_theodolite.cli.quality import main as quality

        return quality(argv[1:])
    if argv[:1] == ["history"]:
        from pytest_theodolite.cli.history import main as history

        return history(argv[1:])
    if argv[:1] == ["export"]:
        from pytest_theodolite.cli.export import main as export

        return export(argv[1:])
    from pytest_theodolite.cli.analyse import main as analyse

    return analyse(argv)


if __name__ == "__main__":
    sys.exit(main())
