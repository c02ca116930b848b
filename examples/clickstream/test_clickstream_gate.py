"""The click-stream job's scalability gate: its demand at three user counts against baselines/."""

import pytest
from clickstream import CLICKSTREAM_USERS


@pytest.mark.theodolite(
    CLICKSTREAM_USERS,
    loads=[3000, 10000, 18000],
    resources=[1, 2, 3, 4],
    instance_cpu=0.25,
    threshold="5%",
    cost_tolerance="10%",
    spark_conf={"spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
)
def test_clickstream_demand(theodolite_gate):
    theodolite_gate.check()
