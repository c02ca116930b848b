"""Replay the measurement protocol over recorded sub-experiments, to try a change of its stop rules on every run
already on disk before spending a gate run on it.

Each repetition's samples are rebuilt from its raw series (lag, the last finished batch's id, duration and end,
the processed rate) and fed, one by one, to core.protocol.MeasurementProtocol with the plan and SLO the run
recorded: first as the plugin does now (the replay must reproduce the recorded stop: its fidelity is printed),
then with a candidate rule for ending a falling-behind repetition early. Prints every repetition whose stop or
verdict the candidate changes, and the seconds it would have saved.

    python experiments/replay_protocol.py RESULTS_DIR... [--candidate marginal-rate --confidence 0.95]
    python experiments/replay_protocol.py RESULTS_DIR... --candidate plan --plan min_duration_s=15

``--candidate plan`` replays the plan each run recorded with fields of core.protocol.MeasurementPlan changed
(``--plan FIELD=VALUE``, repeatable) instead of a falling-behind rule; a repetition whose replay runs past its
recorded samples (the candidate would have measured longer than the run did) is counted apart, its verdict
unknown.

``--candidate not-settled-batches`` changes when a stop counts as certain instead: a not-settled repetition only
where today's rule says so and at least ``--batches`` batches finished under the limit.

Candidates (ORed with today's falling-behind rule):
- ``four-growing``: the last four batches under the limit grow by steps that do not shrink, to 1.5x the first
  (today's rule asks three batches, doubling, and 4x the shortest batch under the limit).
- ``beyond-batch-bound``: the last three batches under the limit each beyond the batch bound by ``--margin``
  (default: the plan's settling tolerance) and the newest no shorter than the oldest -- the rule plans record
  as ``fail_beyond_batch_bound`` since 2026-12-06 (a plan recorded before replays without it, so the candidate
  shows what it changes there).
- ``marginal-rate``: every batch under the limit took longer than the load needed to fill it, and a line
  duration = c0 + records / mu through them (at least --batches) gives mu's upper bound below the load minus
  the lag-trend threshold: larger batches would not keep up either.
- ``rho-fit``: d(k+1) = a + rho d(k) fitted over the last --batches pairs of batches under the limit, the newest
  the longest: rho's lower bound (--confidence) at 1 or above -- batches that grow past every fixed point.

A batch's duration is read from the first sample that names it (the recorded batch-duration is the longer of
the last finished batch and the one running); its records are its processed rate times that duration.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from itertools import pairwise
from pathlib import Path

import numpy as np
from scipy import stats

from pytest_theodolite.core import protocol as protocol_module
from pytest_theodolite.core.batch_trends import durations_beyond_bound
from pytest_theodolite.core.measurement_plan import MeasurementPlan
from pytest_theodolite.core.protocol import FAILING_STOPS, MeasurementProtocol, Phase, Stop
from pytest_theodolite.store.results import iter_repetition_series, list_experiment_ids, read_results


def samples(series):
    """(t, lag, batch id, finished batch ms, batch end, records of that batch) per recorded sample."""
    lag = series["lag-trend"]
    by_t = {
        name: dict(zip(series[name].timestamps_s, series[name].values, strict=True))
        for name in ("batch-id", "batch-duration", "batch-end", "processed-rate")
        if name in series
    }
    first_duration: dict[int, float] = {}
    rows = []
    for t, value in zip(lag.timestamps_s, lag.values, strict=True):
        batch = by_t.get("batch-id", {}).get(t)
        finished = records = None
        if batch is not None and not math.isnan(batch):
            batch = int(batch)
            first_duration.setdefault(batch, by_t.get("batch-duration", {}).get(t))
            finished = first_duration[batch]
            rate = by_t.get("processed-rate", {}).get(t)
            if finished is not None and rate is not None:
                records = rate * finished / 1000.0
        rows.append((t, value, batch, finished, by_t.get("batch-end", {}).get(t), records))
    return rows


def four_growing(protocol: MeasurementProtocol, records: dict[int, float], args) -> bool:
    limited = protocol.limited_durations()
    if len(limited) < 4:
        return False
    recent = limited[-4:]
    steps = [b - a for a, b in pairwise(recent)]
    return (
        all(s > 0 for s in steps)
        and all(later >= 0.9 * earlier for earlier, later in pairwise(steps))
        and recent[-1] >= max(1.5 * recent[0], 3.0)
    )


def marginal_rate(protocol: MeasurementProtocol, records: dict[int, float], args) -> bool:
    limited = protocol.limited_batches()
    ids = [b for b in limited if b in records]
    if len(ids) < args.batches or protocol.offered_rate is None:
        return False
    durations = np.array([limited[b] for b in ids])
    counts = np.array([records[b] for b in ids])
    if np.any(counts >= protocol.offered_rate * durations) or np.ptp(counts) <= 0:
        return False  # a batch that kept up, or no spread of sizes to fit
    fit = stats.linregress(counts, durations)
    low = fit.slope - stats.t.ppf(0.5 + args.confidence / 2, len(ids) - 2) * fit.stderr
    return bool(low > 0 and 1 / low < protocol.offered_rate - protocol.threshold_rps)


def rho_fit(protocol: MeasurementProtocol, records: dict[int, float], args) -> bool:
    recent = np.array(protocol.limited_durations()[-(args.batches + 1) :])
    if (
        len(recent) < args.batches + 1
        or args.batches < 3
        or recent[-1] < recent.max()
        or np.ptp(recent[:-1]) <= 0
    ):
        return False
    fit = stats.linregress(recent[:-1], recent[1:])
    low = fit.slope - stats.t.ppf(0.5 + args.confidence / 2, args.batches - 2) * fit.stderr
    return bool(low >= 1.0)


def not_settled_batches(protocol: MeasurementProtocol, args) -> bool | None:
    """Not settled is certain only where today's rule says so and at least --batches finished under the limit."""
    certain = MeasurementProtocol.certain.fget(protocol)
    if protocol.stop is Stop.NOT_SETTLED and certain:
        return len(protocol.limited_durations()) >= args.batches
    return certain


def beyond_batch_bound(protocol: MeasurementProtocol, records: dict[int, float], args) -> bool:
    """core.batch_trends.durations_beyond_bound over the batches under the limit, with --margin."""
    margin = protocol.plan.settle_tolerance if args.margin is None else args.margin
    bound = protocol.max_batch_s
    return bound is not None and durations_beyond_bound(protocol.limited_durations(), bound, margin)


CANDIDATES = {
    "four-growing": four_growing,
    "marginal-rate": marginal_rate,
    "rho-fit": rho_fit,
    "beyond-batch-bound": beyond_batch_bound,
    "plan": None,
}
#: candidates for when a stop counts as certain, rather than for when a repetition stops
CERTAINTY_CANDIDATES = {"not-settled-batches": not_settled_batches}


def plan_overrides(entries):
    """``["min_duration_s=15"]`` -> ``{"min_duration_s": 15.0}``, typed as MeasurementPlan's field."""
    names = [f.name for f in dataclasses.fields(MeasurementPlan)]
    overrides = {}
    for entry in entries:
        name, _, value = entry.partition("=")
        if name not in names:
            raise SystemExit(f"--plan {entry}: no such MeasurementPlan field; one of {', '.join(names)}")
        default = getattr(MeasurementPlan(), name)
        if isinstance(default, bool):  # bool("false") is True
            if value.lower() not in ("true", "false"):
                raise SystemExit(f"--plan {entry}: {name} takes true or false")
            overrides[name] = value.lower() == "true"
        else:
            overrides[name] = type(default)(value) if default is not None else float(value)
    return overrides


def replay(results, sub, repetition, rows, rule=None, args=None, overrides=None, certainty=None):
    record = next((r for r in sub.repetitions if r.repetition == repetition), None)
    recorded = record.protocol if record is not None else {}
    # a repetition offered a share of the load's rate ran at it, its bounds in seconds stretched by bounds_share
    # (a FAIL measured again at the slowest speed the calibration allows), as cli/analyse.py re-judges it
    slo = results.slo_settings.dilated(float(recorded.get("bounds_share", 1.0)))
    rate = float(recorded.get("offered_rate") or sub.target_rate)
    threshold = slo.lag_trend_threshold.for_load(rate)
    plan = MeasurementPlan.from_dict(results.settings.get("protocol") or {})
    if overrides:
        plan = dataclasses.replace(plan, **overrides)
    records = {b: n for _, _, b, _, _, n in rows if b is not None and n is not None}
    today = protocol_module.MeasurementProtocol.falling_behind

    class Candidate(MeasurementProtocol):
        def falling_behind(self) -> bool:
            return today(self) or (rule is not None and rule(self, records, args))

        @property
        def certain(self) -> bool | None:
            return MeasurementProtocol.certain.fget(self) if certainty is None else certainty(self, args)

    protocol = Candidate(
        plan,
        threshold,
        method=slo.slope_method,
        confidence=slo.confidence,
        offered_rate=rate,
        max_batch_s=slo.max_batch_duration_s,
    )
    for t, lag, batch, finished, end, _ in rows:
        if protocol.feed(t, lag, batch, finished, end) is Phase.DONE:
            break
    if protocol.phase is not Phase.DONE:
        return ("ran-out", None, False, protocol.last_s - rows[0][0])
    if protocol.stop in FAILING_STOPS:
        verdict = "fail"
    else:
        side = protocol.estimate.side_of(threshold) if protocol.estimate is not None else None
        verdict = None if side is None else side.value
    return (
        protocol.stop.value if protocol.stop else None,
        verdict,
        protocol.certain,
        protocol.last_s - rows[0][0],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", nargs="+", type=Path, help="results directories of gate runs")
    parser.add_argument(
        "--candidate", choices=sorted({*CANDIDATES, *CERTAINTY_CANDIDATES}), default="marginal-rate"
    )
    parser.add_argument("--confidence", type=float, default=0.95, help="marginal-rate, rho-fit: of the bound")
    parser.add_argument(
        "--batches",
        type=int,
        default=3,
        help="marginal-rate, not-settled-batches: batches under the limit, at least; rho-fit: pairs fitted",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=None,
        help="beyond-batch-bound: how far beyond the bound each batch lies (default: the plan's settle tolerance)",
    )
    parser.add_argument(
        "--plan", action="append", default=[], help="plan: a MeasurementPlan field changed, FIELD=VALUE"
    )
    args = parser.parse_args()
    overrides = plan_overrides(args.plan) if args.candidate == "plan" else None
    total = same = ran_out = 0
    seconds_now = saved = 0.0
    changed = []
    for directory in args.results:
        for experiment in list_experiment_ids(directory):
            results = read_results(directory, experiment)
            if (results.settings.get("protocol") or {}).get("warmup_s") is not None:
                continue  # Theodolite's fixed warm-up: nothing to stop early
            for sub in results.sub_experiments:
                for repetition, series in iter_repetition_series(results, sub.load, sub.resources):
                    record = next((r for r in sub.repetitions if r.repetition == repetition), None)
                    if record is None or not (record.protocol or {}).get("stop") or "lag-trend" not in series:
                        continue
                    rows = samples(series)
                    now = replay(results, sub, repetition, rows)
                    candidate = replay(
                        results,
                        sub,
                        repetition,
                        rows,
                        CANDIDATES.get(args.candidate),
                        args,
                        overrides,
                        CERTAINTY_CANDIDATES.get(args.candidate),
                    )
                    total += 1
                    same += now[0] == record.protocol["stop"]
                    seconds_now += now[3]
                    if candidate[0] == "ran-out":
                        ran_out += 1
                        changed.append(f"  {directory} {experiment} {sub.load}@{sub.resources}: ran out")
                        continue
                    saved += now[3] - candidate[3]
                    if now[:3] != candidate[:3]:
                        changed.append(
                            f"  {directory} {experiment} {sub.load}@{sub.resources}: {now[:3]} -> {candidate[:3]},"
                            f" {now[3]:.0f} -> {candidate[3]:.0f} s"
                        )
    print("\n".join(changed))
    print(
        f"{total} repetitions; replay reproduces the recorded stop in {same}; candidate {args.candidate} changes "
        f"{len(changed) - ran_out} ({ran_out} ran past the recorded samples), saves {saved:.0f} of "
        f"{seconds_now:.0f} s"
    )


if __name__ == "__main__":
    main()
