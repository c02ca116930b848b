"""Puts this repository's root (``spark_jobs/``, the use cases as the gates import them) and ``benchmarks/``
(``usecases.py``, the gates' settings) on ``sys.path``: the scripts run as ``python experiments/NAME.py``, and
the installed package ships the jobs under another name (``theodolite_spark_jobs``)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

for entry in (ROOT / "benchmarks", ROOT):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))
