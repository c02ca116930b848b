"""The one error the generator raises for input it refuses (a ValueError, so callers may catch either)."""


class WorkloadError(ValueError):
    """A workload the generator refuses before producing anything; the message says why and what to do."""
