"""PySpark's Python worker daemon, started without Spark's archives on ``sys.path`` where the same pyspark is
installed as a package -- the executors' daemon of the plugin's own standalone cluster
(``spark.python.daemon.module``).

Spark puts ``pyspark.zip``, py4j's zip and the spark-core jar first on the executors' Python path. Before every
task, PySpark's worker calls ``importlib.invalidate_caches()``; on Python 3.11 every zip importer then re-reads
its archive's whole directory, and there is one importer per package imported from an archive (16 for a pandas
UDF). Measured: 75 ms a task on a full core, 58 % of UC4's Python worker time at half a core -- a cost of the
host's Python, not of the job under test. Where ``SPARK_HOME`` is the installed pyspark package (pip's layout),
the archives only repeat it: the daemon leaves them off and imports pyspark from the package. Elsewhere (a Spark
distribution) it changes nothing.

It imports nothing of the plugin beyond its two package markers: every executor starts it by name.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_ARCHIVE_SUFFIXES = (".zip", ".jar")


def without_spark_archives(path: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """``path`` without the archives inside ``SPARK_HOME`` (``python/lib/*.zip``, ``jars/*.jar``); the user's
    own archives and every directory stay."""
    home = environ.get("SPARK_HOME")
    if not home:
        return list(path)
    root = Path(home).resolve()

    def is_spark_archive(entry: str) -> bool:
        return entry.endswith(_ARCHIVE_SUFFIXES) and root in Path(entry).resolve().parents

    return [entry for entry in path if not is_spark_archive(entry)]


def pyspark_is_spark_home(environ: Mapping[str, str]) -> bool:
    """Whether ``import pyspark`` (on the current ``sys.path``) finds the package ``SPARK_HOME`` is."""
    home = environ.get("SPARK_HOME")
    spec = importlib.util.find_spec("pyspark")
    if not home or spec is None or spec.origin is None:
        return False
    return Path(spec.origin).resolve().parent == Path(home).resolve()


def main() -> None:
    original = list(sys.path)
    sys.path[:] = without_spark_archives(original, os.environ)
    if not (pyspark_is_spark_home(os.environ) and importlib.util.find_spec("py4j") is not None):
        sys.path[:] = original
    # finding this module already made an importer for each archive, and invalidate_caches() walks those
    for entry in set(original) - set(sys.path):
        sys.path_importer_cache.pop(entry, None)
    # pyspark.daemon reads the worker module from sys.argv, as Spark passes it to this module
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
