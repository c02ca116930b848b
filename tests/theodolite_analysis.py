"""Theodolite's own offline analysis (analysis/src/demand.py in cau-se/theodolite), written here from its
description to check that the raw files the plugin writes read the same there: it adds a `sec_start`
column, cuts the warm-up, then regresses column 2 on column 1 *by position* (its collector writes
`labels,timestamp,value`)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def theodolite_trend_slope(path, warmup_s: float) -> float:
    frame = pd.read_csv(path)
    frame["sec_start"] = frame.loc[0:, "timestamp"] - frame.iloc[0]["timestamp"]
    regress = frame.loc[frame["sec_start"] >= warmup_s]
    x, y = regress.iloc[:, 1].to_numpy(float), regress.iloc[:, 2].to_numpy(float)
    return float(np.polyfit(x, y, 1)[0])
