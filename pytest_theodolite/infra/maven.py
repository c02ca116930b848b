"""Resolve Maven coordinates into a jar cache outside the repository, once, and reuse it.

Both the broker (kafka_2.13 + a log4j2 backend) and Spark's Kafka connector come from here. A set of
coordinates maps to one folder named by its hash; a marker file written last makes a half-finished
download (crash, Ctrl-C) count as absent, and a file lock keeps concurrent pytest-xdist workers from
resolving the same set twice.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from filelock import FileLock

from pytest_theodolite.core.errors import TheodoliteSetupError

MIN_JAVA_MAJOR = 17
RESOLVE_TIMEOUT_S = 900


def default_cache_dir() -> Path:
    """``$THEODOLITE_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-theodolite``, else ``~/.cache/...``."""
    if env := os.environ.get("THEODOLITE_CACHE_DIR"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-theodolite"


def java_executable() -> str:
    """The ``java`` to launch JVMs with: ``$JAVA_HOME/bin/java`` or ``java`` on PATH, checked to be >= 17."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise TheodoliteSetupError(
            "Java was not found (no JAVA_HOME and no `java` on PATH). Install a JDK 17 or newer "
            "(e.g. `apt-get install openjdk-17-jdk-headless`) or set JAVA_HOME."
        )
    major = java_major_version(java)
    if major < MIN_JAVA_MAJOR:
        raise TheodoliteSetupError(
            f"{java} is Java {major}, but Kafka 4 and Spark 4 need Java {MIN_JAVA_MAJOR} or newer. "
            "Install a newer JDK and point JAVA_HOME at it."
        )
    return java


def java_major_version(java: str) -> int:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TheodoliteSetupError(
            f"Could not run `{java} -version` ({exc}). Check your JDK install."
        ) from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise TheodoliteSetupError(f"Could not read the Java version from `{java} -version`: {out.strip()!r}")
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major  # "1.8" means 8


def resolve(coordinates: Sequence[str], cache_dir: Path | None = None, mvn: str | None = None) -> list[Path]:
    """Return the jars of ``coordinates`` (``group:artifact:version``) and all their runtime dependencies."""
    cache_dir = Path(cache_dir or default_cache_dir())
    for coordinate in coordinates:
        if len(coordinate.split(":")) != 3:
            raise TheodoliteSetupError(
                f"Maven coordinate {coordinate!r} is not of the form group:artifact:version"
            )
    target = _cache_entry(coordinates, cache_dir)
    marker = target / ".complete"
    if marker.exists():
        return _listed_jars(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=RESOLVE_TIMEOUT_S):
        if marker.exists():  # another worker finished it while we waited
            return _listed_jars(target)
        _run_maven(coordinates, target, mvn)
        (target / "coordinates.txt").write_text("\n".join(coordinates) + "\n")
        marker.write_text("")
    return _listed_jars(target)


def is_cached(coordinates: Sequence[str], cache_dir: Path | None = None) -> bool:
    """Whether an earlier `resolve` of `coordinates` completed into the jar cache (no Maven is run)."""
    return (_cache_entry(coordinates, Path(cache_dir or default_cache_dir())) / ".complete").exists()


def _cache_entry(coordinates: Sequence[str], cache_dir: Path) -> Path:
    key = hashlib.sha256("\n".join(sorted(coordinates)).encode()).hexdigest()[:16]
    return cache_dir / "jars" / key


def _listed_jars(target: Path) -> list[Path]:
    jars = sorted((target / "lib").glob("*.jar"))
    if not jars:
        raise TheodoliteSetupError(f"The jar cache {target} is empty; delete that folder and run again.")
    return jars


def _run_maven(coordinates: Sequence[str], target: Path, mvn: str | None) -> None:
    mvn = mvn or shutil.which("mvn")
    if not mvn or not shutil.which(mvn):
        raise TheodoliteSetupError(
            "Maven (`mvn`) was not found on PATH; it is needed once to download the Kafka and Spark-connector "
            "jars. Install it (e.g. `apt-get install maven`) or put it on PATH."
        )
    work = target.with_name(target.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "pom.xml").write_text(_pom(coordinates))
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(work / "pom.xml"),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={work / 'lib'}",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise TheodoliteSetupError(
            f"Maven did not finish resolving {', '.join(coordinates)} within {RESOLVE_TIMEOUT_S} s. "
            "Check that Maven Central (or your mirror in ~/.m2/settings.xml) is reachable."
        ) from exc
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip().splitlines()
        errors = [line for line in output if "ERROR" in line][:6] or output[-10:]
        raise TheodoliteSetupError(
            f"Maven could not resolve {', '.join(coordinates)}:\n  "
            + "\n  ".join(errors)
            + "\nCheck the versions and that Maven Central (or your mirror in ~/.m2/settings.xml) is reachable."
        )
    work.rename(target)


def _pom(coordinates: Sequence[str]) -> str:
    deps = "".join(
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>".format(
            *(escape(part) for part in c.split(":"))
        )
        for c in coordinates
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>pytest-theodolite</groupId><artifactId>jar-cache</artifactId><version>1</version>"
        f"<dependencies>{deps}</dependencies></project>"
    )
