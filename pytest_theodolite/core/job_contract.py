"""The job contract as a checked interface: what the runner passes a job's ``start_query``, and whether a
function's signature can take it -- read before anything is measured, so that a job written without the
options a secured cluster or a capacity measurement passes is refused at the start, with the signature to
write, not at its first run on a SASL cluster.

Every keyword below is passed on every run: ``kafka_options`` is ``{}`` where the cluster has no client
settings, ``max_offsets_per_trigger`` is None where micro-batches are not capped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from pytest_theodolite.core.errors import TheodoliteSetupError

#: the topics and the checkpoint: what every job needs to run at all
TOPIC_OPTIONS = ("bootstrap_servers", "input_topic", "output_topic", "checkpoint_dir")
#: the cluster's client settings (SASL, TLS: pass them to the source and the sink) and the micro-batch cap
RUNNER_OPTIONS = (*TOPIC_OPTIONS, "kafka_options", "max_offsets_per_trigger")

SIGNATURE = (
    "def start_query(spark: SparkSession, *, bootstrap_servers: str, input_topic: str, output_topic: str,\n"
    "                checkpoint_dir: str, kafka_options: dict[str, str] | None = None,\n"
    "                max_offsets_per_trigger: int | None = None, **options: Any) -> StreamingQuery"
)


class JobContractError(TheodoliteSetupError):
    """A job's ``start_query`` cannot take what the runner passes it."""


def contract_problems(start_query: Callable[..., Any], passed: Iterable[str]) -> list[str]:
    """What keeps `start_query` from being called as ``start_query(spark, **{name: ... for name in passed})``:
    a keyword it cannot take, a parameter nothing fills; [] where it can be called so (or its signature cannot
    be read, as for some compiled callables: its first run tells then)."""
    try:
        signature = inspect.signature(start_query)
    except (TypeError, ValueError):
        return []
    parameters = list(signature.parameters.values())
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    takes_extra_positional = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    problems = []
    session = positional[0] if positional else None
    if session is None and not takes_extra_positional:
        problems.append("it takes no positional parameter for the SparkSession")
    takes_any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    by_keyword = {
        p.name
        for p in parameters
        if p is not session
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    names = list(dict.fromkeys(passed))
    if not takes_any_keyword:
        refused = [name for name in names if name not in by_keyword]
        if refused:
            problems.append(f"it cannot take {_listed(refused)} (no such parameter, and no **options)")
    unfilled = [
        p.name
        for p in parameters
        if p is not session
        and p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and (p.kind is inspect.Parameter.POSITIONAL_ONLY or p.name not in names)
    ]
    if unfilled:
        problems.append(
            f"it needs {_listed(unfilled)}, which the runner does not pass: give "
            f"{'it' if len(unfilled) == 1 else 'them'} a default, or name {'it' if len(unfilled) == 1 else 'them'} "
            "in the benchmark's job_options"
        )
    return problems


def check_contract(name: str, start_query: Callable[..., Any], passed: Iterable[str]) -> None:
    """Raise JobContractError, naming benchmark `name`, its job and the signature to write, where
    `start_query` cannot take `passed` (``contract_problems``)."""
    problems = contract_problems(start_query, passed)
    if not problems:
        return
    job = (
        f"{getattr(start_query, '__module__', '?')}.{getattr(start_query, '__qualname__', repr(start_query))}"
    )
    raise JobContractError(
        f"benchmark {name}: its job {job} cannot be run: {'; '.join(problems)}. The runner calls it with the "
        f"SparkSession and, by keyword, {_listed(list(dict.fromkeys(passed)))} on every run. Write it as\n\n"
        f"    {SIGNATURE}\n\n"
        "passing kafka_options to the Kafka source and sink, and max_offsets_per_trigger (where set) to the "
        "source as maxOffsetsPerTrigger (docs/writing-a-gate.md, the job contract)"
    )


def _listed(names: list[str]) -> str:
    return ", ".join(names)


def imported_packages(source: str, own: str = "") -> tuple[str, ...]:
    """The top-level packages a job's module imports (absolute imports, at any depth of its code), without the
    standard library's and its own package `own`: what its executors' Python must be able to import."""
    import ast
    import sys

    names: dict[str, None] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(dict.fromkeys(alias.name.partition(".")[0] for alias in node.names))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names[node.module.partition(".")[0]] = None
    skipped = {*sys.stdlib_module_names, "__future__", own}
    return tuple(name for name in names if name not in skipped)
