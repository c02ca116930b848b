"""How a pull-request-mode run stops when a signal reaches it during its paired backlog read: starts
``pytest benchmarks -k GATE --theodolite-compare-ref HEAD`` in a session of its own (SIGINT at its default, as
in a terminal), waits until both sides read (their event-log directories exist) and `--after` seconds more,
sends the signal to the pytest process alone or to its process group (what Ctrl-C does), and prints how long
the run took to end, its exit code, and what it left: processes of its session, ``theodolite-*`` temp dirs.

    python experiments/stop_during_read.py --signal TERM
    python experiments/stop_during_read.py --signal INT --group
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMP = Path(tempfile.gettempdir())


def temp_dirs() -> set[Path]:
    return set(TEMP.glob("theodolite-*"))


def session_processes(session: int) -> list[str]:
    """Command lines of the processes left in `session` (ps -s)."""
    listed = subprocess.run(["ps", "-o", "pid=,args=", "-s", str(session)], capture_output=True, text=True)
    return [line.strip() for line in listed.stdout.splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gate", default="uc1", help="the -k expression selecting one benchmark's gates")
    parser.add_argument("--signal", choices=("INT", "TERM"), default="TERM")
    parser.add_argument("--group", action="store_true", help="signal the process group, as Ctrl-C does")
    parser.add_argument("--after", type=float, default=60.0, help="seconds into the read to send it")
    parser.add_argument("--out", type=Path, default=TEMP / "stop-during-read")
    args = parser.parse_args()
    before = temp_dirs()
    args.out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest", "benchmarks", "-k", args.gate, "-p", "no:cacheprovider"]
    command += ["--theodolite-compare-ref", "HEAD", f"--theodolite-results={args.out / 'results'}"]
    with open(args.out / "log", "w") as log:
        run = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # a background start would leave SIGINT ignored, and Python keeps it so
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    started = time.monotonic()
    while len([d for d in temp_dirs() - before if d.name.startswith("theodolite-event-log-")]) < 2:
        if run.poll() is not None:
            sys.exit(f"the run ended (exit {run.returncode}) before both sides read; see {args.out / 'log'}")
        time.sleep(1)
    reading = time.monotonic() - started
    time.sleep(args.after)
    number = getattr(signal, f"SIG{args.signal}")
    signalled = time.monotonic()
    if args.group:
        os.killpg(run.pid, number)
    else:
        os.kill(run.pid, number)
    code = run.wait()
    ended = time.monotonic() - signalled
    time.sleep(3)
    left = session_processes(run.pid)
    print(
        f"both sides reading {reading:.0f} s in; SIG{args.signal} to the "
        f"{'process group' if args.group else 'pytest process'} {args.after:.0f} s later: "
        f"exit {code} {ended:.0f} s after it; left: {len(left)} processes, {len(temp_dirs() - before)} temp dirs"
    )
    for line in left:
        print("  ", line[:160])


if __name__ == "__main__":
    main()
