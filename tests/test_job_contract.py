"""The job contract, checked before anything is measured (core/job_contract.py)."""

import pytest

from pytest_theodolite.core.job_contract import RUNNER_OPTIONS, SIGNATURE, JobContractError, contract_problems
from pytest_theodolite.engine.benchmark import Benchmark, ExperimentSettings
from pytest_theodolite.engine.session import TheodoliteSession
from theodolite_generator import Workload


def contract_job(
    spark,
    *,
    bootstrap_servers,
    input_topic,
    output_topic,
    checkpoint_dir,
    kafka_options=None,
    max_offsets_per_trigger=None,
    **options,
):
    raise AssertionError("only its signature is read")


def topics_only(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir):
    raise AssertionError("only its signature is read")


def needs_window(spark, *, window, **options):
    raise AssertionError("only its signature is read")


def test_the_documented_signature_and_a_catch_all_take_every_keyword():
    assert contract_problems(contract_job, RUNNER_OPTIONS) == []
    assert contract_problems(lambda spark, **options: None, (*RUNNER_OPTIONS, "window")) == []
    assert "max_offsets_per_trigger: int | None = None" in SIGNATURE


def test_a_job_without_the_runners_keywords_is_told_which():
    (problem,) = contract_problems(topics_only, RUNNER_OPTIONS)
    assert (
        problem
        == "it cannot take kafka_options, max_offsets_per_trigger (no such parameter, and no **options)"
    )


def test_a_parameter_nothing_fills_is_named_and_a_job_option_fills_it():
    (problem,) = contract_problems(needs_window, RUNNER_OPTIONS)
    assert problem.startswith("it needs window, which the runner does not pass")
    assert contract_problems(needs_window, (*RUNNER_OPTIONS, "window")) == []


def test_a_job_with_no_place_for_the_session_is_refused():
    def keywords_only(*, bootstrap_servers, **options):
        raise AssertionError

    assert contract_problems(keywords_only, RUNNER_OPTIONS) == [
        "it takes no positional parameter for the SparkSession"
    ]


def test_a_callable_without_a_readable_signature_is_left_to_its_first_run():
    assert contract_problems(max, RUNNER_OPTIONS) == []  # a builtin without a signature to read


def test_a_benchmark_passes_its_job_options_and_extra_topics_too():
    benchmark = Benchmark(
        "t",
        topics_only,
        lambda keys: Workload(keys=keys),
        job_options={"window": "5 s"},
        extra_topics=("config",),
    )
    assert benchmark.job_keywords() == (*RUNNER_OPTIONS, "window", "config")
    with pytest.raises(JobContractError) as refused:
        benchmark.check_job()
    message = str(refused.value)
    assert "benchmark t: its job test_job_contract.topics_only cannot be run" in message
    assert "cannot take kafka_options, max_offsets_per_trigger, window, config" in message
    assert SIGNATURE in message


def test_a_session_refuses_the_job_before_it_calibrates_or_measures(tmp_path):
    # no broker, no cluster: reaching the calibration would fail otherwise than with the contract's error
    session = TheodoliteSession(kafka=None, spark=None, results_dir=tmp_path, testbed={})  # type: ignore[arg-type]
    benchmark = Benchmark("t", topics_only, lambda keys: Workload(keys=keys))
    with pytest.raises(JobContractError, match="cannot take kafka_options"):
        session.experiment(benchmark, ExperimentSettings(loads=(1,), resources=(1,)))
    assert session.calibration is None and session.experiments == {}


def test_the_runner_passes_every_contract_keyword_on_every_run():
    from pytest_theodolite.engine.job import JobLauncher
    from pytest_theodolite.infra.kafka.admin import KafkaCluster

    def runner(kafka, **job_options):
        benchmark = Benchmark(
            "t",
            contract_job,
            lambda keys: Workload(keys=keys),
            job_options=job_options,
            extra_topics=("config",),
        )
        settings = ExperimentSettings(loads=(1,), resources=(1,))
        return JobLauncher(benchmark, settings, kafka, spark=None)  # type: ignore[arg-type]

    topics = {"input": "i", "output": "o", "config": "c"}
    plain = KafkaCluster("127.0.0.1:9")  # never connected to
    assert runner(plain).job_options(topics) == {
        "kafka_options": {},
        "max_offsets_per_trigger": None,
        "config": "c",
    }
    # a cap the benchmark sets holds until a run sets its own
    assert runner(plain, max_offsets_per_trigger=500).job_options(topics)["max_offsets_per_trigger"] == 500
    capped = runner(plain, max_offsets_per_trigger=500).job_options(topics, {"max_offsets_per_trigger": 9})
    assert capped["max_offsets_per_trigger"] == 9
    secured = KafkaCluster("127.0.0.1:9", properties={"security.protocol": "SASL_PLAINTEXT"})
    assert runner(secured).job_options(topics)["kafka_options"] == {
        "kafka.security.protocol": "SASL_PLAINTEXT"
    }


def test_a_jobs_packages_are_what_it_imports_but_the_standard_library_and_its_own():
    from pytest_theodolite.core.job_contract import imported_packages

    source = (
        "from __future__ import annotations\nimport json, os.path\nimport pandas as pd\n"
        "from pyspark.sql import functions as F\nfrom myjobs.common import x\nfrom . import sibling\n"
        "def udf():\n    import pyarrow.compute\n"
    )
    assert imported_packages(source, own="myjobs") == ("pandas", "pyspark", "pyarrow")
    # a benchmark reads its job's module: here this test module's own imports
    packages = Benchmark("t", contract_job, lambda keys: Workload(keys=keys)).job_packages()
    assert {"pytest", "theodolite_generator", "pytest_theodolite"} <= set(packages)
    assert "test_job_contract" not in packages


def test_a_pandas_udf_job_without_pyarrow_is_told_which_extra_installs_it():
    from pytest_theodolite.core.outcomes import Outcome
    from pytest_theodolite.engine.job import JobLauncher, RunAborted, RunningJob
    from pytest_theodolite.infra.kafka.admin import KafkaCluster

    def needs_arrow(spark, **options):
        raise ImportError("PyArrow >= 11.0.0 must be installed; however, it was not found.")

    benchmark = Benchmark("t", needs_arrow, lambda keys: Workload(keys=keys))
    jobs = JobLauncher(
        benchmark, ExperimentSettings(loads=(1,), resources=(1,)), KafkaCluster("127.0.0.1:9"), None
    )  # type: ignore[arg-type]
    job = RunningJob("r", {"input": "i", "output": "o"})
    with pytest.raises(RunAborted) as aborted:
        jobs.restart_query(job, {})
    assert aborted.value.outcome is Outcome.ERRORED
    assert aborted.value.reason == (
        "the job did not start: ImportError: PyArrow >= 11.0.0 must be installed; however, it was not found. "
        "(a job with pandas UDFs needs pyarrow: pip install 'pytest-theodolite[pandas-udf]')"
    )
