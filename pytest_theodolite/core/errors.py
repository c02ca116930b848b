"""Errors that stop a run with one clear, actionable message (no stack trace for the user)."""


class TheodoliteSetupError(RuntimeError):
    """A part the benchmarks need (Java, Maven, a broker, a Spark cluster) is missing or broken.

    The message says what went wrong and what to do about it; the plugin shows it without a traceback.
    """


class TheodoliteLeakWarning(UserWarning):  # shown by default, unlike ResourceWarning
    """Something a run made could not be removed (a topic on the cluster, a cgroup): it is left behind.

    The message names what is left and how to remove it by hand; the run's verdicts are not affected."""


class TheodoliteSetupWarning(UserWarning):
    """A part the benchmarks may need looks missing, where that cannot be told before a job runs (a package the
    job imports that the executors lack, while the job may never import it there)."""
