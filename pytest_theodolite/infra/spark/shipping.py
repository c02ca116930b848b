"""The job's code and state where a cluster's executors can reach them.

Executors of a cluster the plugin did not start share neither this machine's Python path nor its file system:
the job's top-level package goes to them as a zip (SparkContext.addPyFile), and its checkpoint under a root
every executor reaches (``--theodolite-checkpoint-root``: hdfs://, s3a://, a shared mount).
"""

from __future__ import annotations

import importlib
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytest_theodolite.core.errors import TheodoliteSetupError


def job_archive(module_name: str, directory: Path) -> Path:
    """The top-level package of `module_name` as ``<package>.zip`` in `directory` (its .py files), or its
    module file copied there where it is a single module: what ``addPyFile`` ships. The package is taken from
    where this process imported it (in pull-request mode: each side's own tree)."""
    top = module_name.split(".")[0]
    module = sys.modules.get(top) or importlib.import_module(top)
    origin = getattr(module, "__file__", None)
    if not origin:
        raise TheodoliteSetupError(
            f"the job's package {top!r} has no file of its own (a namespace package?): give it an __init__.py "
            "so that it can be shipped to the cluster's executors"
        )
    source = Path(origin)
    if source.name != "__init__.py":
        target = directory / source.name
        shutil.copyfile(source, target)
        return target
    archive = directory / f"{top}.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(source.parent.rglob("*.py")):
            if "__pycache__" not in path.parts:
                bundle.write(path, Path(top) / path.relative_to(source.parent))
    return archive


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
