"""pytest-theodolite: Theodolite scalability benchmarks as pytest regression gates."""

__version__ = "0.1.0"

KAFKA_VERSION = "4.1.1"
