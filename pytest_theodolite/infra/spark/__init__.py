"""Spark for the benchmarks: a cluster with r one-core executor instances and the Kafka connector."""
