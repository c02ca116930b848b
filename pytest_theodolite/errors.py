"""Errors that stop a run with one clear, actionable message (no stack trace for the user)."""


class TheodoliteSetupError(RuntimeError):
    """A part the benchmarks need (Java, Maven, a broker, a Spark cluster) is missing or broken.

    The message says what went wrong and what to do about it; the plugin shows it without a traceback.
    """
