import os

from pytest_theodolite.infra.maven import default_cache_dir

pytest_plugins = ["pytester"]


def pytest_configure(config) -> None:
    # pytester gives every inner run a HOME of its own, and with it an empty cache directory: each inner gate run
    # would resolve the Kafka and connector jars with Maven again and measure the testbed again. The inner runs
    # share this session's cache, as a user's runs share theirs; a test of a cold cache names its own directory.
    os.environ.setdefault("THEODOLITE_CACHE_DIR", str(default_cache_dir()))
