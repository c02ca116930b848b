"""The job's code and state where a cluster's executors can reach them.

Executors of a cluster the plugin did not start share neither this machine's Python path nor its file system:
the job's top-level package goes to them as a zip (SparkContext.addPyFile), and its checkpoint under a root
every executor reaches (``--theodolite-checkpoint-root``: hdfs://, s3a://, a shared mount). Executors of a
cluster started here run this Python environment but not this process's path: a job imported from the
directory pytest runs in (not installed) is put on theirs (`executor_python_path`).
"""

from __future__ import annotations

import importlib
import os
import shutil
import site
import sys
import sysconfig
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytest_theodolite.core.errors import TheodoliteSetupError

#: the session setting that gives the executors their ``PYTHONPATH``
EXECUTOR_PYTHONPATH = "spark.executorEnv.PYTHONPATH"


def _top_level(module_name: str) -> tuple[str, Path | None]:
    """`module_name`'s top-level package (or module) as this process imported it: its name and its file (None:
    a namespace package, a built-in)."""
    top = module_name.split(".")[0]
    module = sys.modules.get(top) or importlib.import_module(top)
    origin = getattr(module, "__file__", None)
    return top, Path(origin) if origin else None


def job_archive(module_name: str, directory: Path) -> Path:
    """The top-level package of `module_name` as ``<package>.zip`` in `directory` (its .py files), or its
    module file copied there where it is a single module: what ``addPyFile`` ships. The package is taken from
    where this process imported it (in pull-request mode: each side's own tree)."""
    top, origin = _top_level(module_name)
    if origin is None:
        raise TheodoliteSetupError(
            f"the job's package {top!r} has no file of its own (a namespace package?): give it an __init__.py "
            "so that it can be shipped to the cluster's executors"
        )
    if origin.name != "__init__.py":
        target = directory / origin.name
        shutil.copyfile(origin, target)
        return target
    archive = directory / f"{top}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(origin.parent.rglob("*.py")):
            if "__pycache__" not in path.parts:
                bundle.write(path, Path(top) / path.relative_to(origin.parent))
    return archive


def import_root(module_name: str) -> Path | None:
    """The directory this process imported `module_name`'s top-level package (or single module) from -- what
    another Python process needs on its path to import it alike; None where it has no file (a namespace package,
    a built-in module)."""
    _, origin = _top_level(module_name)
    if origin is None:
        return None
    source = origin.resolve()
    return source.parent.parent if source.name == "__init__.py" else source.parent


def _site_directories() -> set[Path]:
    """Where this environment's installed packages live: every Python process of it has them on its path."""
    paths = {sysconfig.get_paths()[name] for name in ("purelib", "platlib")}
    paths.update(site.getsitepackages())
    return {Path(p).resolve() for p in paths}


def executor_python_path(module_names: Iterable[str], environ: Mapping[str, str]) -> str:
    """``PYTHONPATH`` for the executors of a cluster started here (``spark.executorEnv.PYTHONPATH``): where each
    of `module_names` was imported from, unless an installed package, then the `environ`'s own ``PYTHONPATH``
    (the setting replaces what the executors would inherit). Spark's Python workers import the functions of a
    job's UDFs from their module, and the plugin's worker daemon by name: from a checkout that is not installed
    they are found only this way."""
    installed = _site_directories()
    entries: list[str] = []
    for name in module_names:
        root = import_root(name)
        if root is not None and root not in installed:
            entries.append(str(root))
    entries.extend(p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return os.pathsep.join(dict.fromkeys(entries))


def is_local_path(location: str) -> bool:
    """A plain path or a file:// URI (deleted here); anything else is the cluster's file system's."""
    scheme = urlparse(location).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and location[1:3] in (":\\", ":/"))  # C:\ on Windows


def checkpoint_location(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}"


def delete_checkpoint(spark: Any, location: str) -> None:
    """Delete a checkpoint on the cluster's file system (hdfs://, s3a://, ...) through the session's Hadoop
    client, while the session still runs."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(location)
    path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(path, True)
