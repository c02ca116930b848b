"""Options and ini parsing, and the report header, through pytester (no broker needed)."""

import pytest

from pytest_theodolite.core.redaction import REDACTED, redact_secrets
from pytest_theodolite.engine.settings import SettingsError, TheodoliteSettings, build
from pytest_theodolite.infra.kafka import client_properties


def test_unknown_kafka_provider_on_the_command_line_is_a_usage_error(pytester):
    result = pytester.runpytest("--kafka", "zookeeper")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kafka: invalid choice: 'zookeeper'*"])


def test_unknown_kafka_provider_in_the_ini_file_names_the_key_and_the_choices(pytester):
    pytester.makeini("[pytest]\ntheodolite_kafka = zookeeper\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*theodolite_kafka = 'zookeeper' is not a Kafka provider; choose one of "
            "embedded, testcontainers, external*"
        ]
    )


def test_external_kafka_without_bootstrap_says_how_to_give_it(pytester):
    result = pytester.runpytest("--kafka", "external")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--kafka external needs the cluster's address: pass --kafka-bootstrap*"])


@pytest.mark.parametrize(
    "value, message",
    [
        ("-1", "*--theodolite-instance-cpu / theodolite_instance_cpu = -1 is outside 0.01..*"),
        ("lots", "*--theodolite-instance-cpu / theodolite_instance_cpu = 'lots' is not a float*"),
    ],
)
def test_bad_instance_cpu_is_a_usage_error(pytester, value, message):
    result = pytester.runpytest(f"--theodolite-instance-cpu={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_spark_master_is_a_usage_error(pytester):
    result = pytester.runpytest("--spark-master", "my-laptop")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--spark-master 'my-laptop' is not a master the gates can size: use*"])


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--spark-master", "sc://connect:15002"],
            "*is a Spark Connect server: a Connect client cannot choose*",
        ),
        (["--spark-master", "local[4]"], "*runs the job inside the driver, without executors to count*"),
        (
            ["--spark-master", "k8s://https://api:6443"],
            "*needs the executors' container image: pass --spark-kubernetes-image*",
        ),
        (
            ["--spark-master", "yarn"],
            "*--spark-master yarn needs the cluster's configuration: set HADOOP_CONF_DIR*",
        ),
        (
            ["--spark-master", "spark://m:7077"],
            "*is a cluster not started here*--theodolite-checkpoint-root*",
        ),
        (
            ["--kafka-replication-factor", "1", "--kafka-min-insync-replicas", "2"],
            "*--kafka-min-insync-replicas 2 exceeds --kafka-replication-factor 1*",
        ),
        (["--kafka-topic-prefix", "gate topics/"], "*a Kafka topic name holds only letters, digits*"),
        (["--kafka-topics", "input=gates.in,output"], "*--kafka-topics entry 'output' is not ROLE=TOPIC*"),
        (["--kafka-topics", "input=x,output=x"], "*--kafka-topics gives one topic to several roles*"),
    ],
)
def test_a_cluster_setting_that_cannot_work_is_refused_before_anything_starts(
    pytester, monkeypatch, args, message
):
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_cluster_settings_reach_the_settings_object():
    values = {
        "--spark-master": "k8s://https://api:6443",
        "--spark-kubernetes-image": "registry.example/spark-py:4.0.0",
        "--spark-kubernetes-namespace": "gates",
        "--spark-driver-host": "10.1.2.3",
        "--theodolite-checkpoint-root": "s3a://bucket/theodolite",
        "--kafka-topic-prefix": "team-a.gates.",
        "--kafka-replication-factor": "3",
        "--kafka-min-insync-replicas": "2",
        "--kafka-topics": "input=team-a.in, output=team-a.out",
    }
    settings = build(values.get, [], environ={})
    assert settings.kafka_topics == {"input": "team-a.in", "output": "team-a.out"}
    assert settings.spark_kind.value == "k8s"
    assert (settings.spark_access.k8s_image, settings.spark_access.k8s_namespace) == (
        "registry.example/spark-py:4.0.0",
        "gates",
    )
    assert settings.spark_access.driver_host == "10.1.2.3"
    assert settings.checkpoint_root == "s3a://bucket/theodolite"
    assert (
        settings.kafka_topic_prefix,
        settings.kafka_replication_factor,
        settings.kafka_min_insync_replicas,
    ) == (
        "team-a.gates.",
        3,
        2,
    )
    defaults = build({}.get, [], environ={})
    assert (defaults.kafka_topic_prefix, defaults.kafka_replication_factor, defaults.checkpoint_root) == (
        "theodolite-",
        None,
        None,
    )


def test_the_topic_settings_name_a_gates_topics_on_the_cluster():
    """--kafka-topic-prefix names the topics a gate creates; --kafka-topics replaces them with existing ones."""
    from pytest_theodolite.engine.kafka_providers import gate_topics as _gate_topics
    from pytest_theodolite.infra.kafka.admin import KafkaCluster

    prefixed = _gate_topics(KafkaCluster("127.0.0.1:1"), build({"--kafka-topic-prefix": "gate."}.get, [], {}))
    assert prefixed.gate_topic_name("r1", "input") == "gate.r1-input"
    fixed = _gate_topics(KafkaCluster("127.0.0.1:1"), build({"--kafka-topics": "input=in"}.get, [], {}))
    assert fixed.gate_topic_name("r1", "input") == "in"


def test_bad_isolation_mode_is_a_usage_error_on_the_command_line_and_in_the_ini_file(pytester):
    result = pytester.runpytest("--theodolite-isolation", "sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--theodolite-isolation: invalid choice: 'sometimes'*"])
    pytester.makeini("[pytest]\ntheodolite_isolation = sometimes\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*theodolite_isolation = 'sometimes' is not an isolation mode; choose one of exclusive, none*"]
    )


def test_command_line_beats_ini_and_ini_beats_default(pytester):
    pytester.makeini("[pytest]\ntheodolite_max_instances = 3\ntheodolite_instance_cpu = 0.5\n")
    pytester.makepyfile("""
        def test_settings(theodolite_settings):
            assert theodolite_settings.max_instances == 3
            assert theodolite_settings.instance_cpu == 0.25
            assert theodolite_settings.kafka_provider == "embedded"
    """)
    result = pytester.runpytest("--theodolite-instance-cpu=0.25")
    result.assert_outcomes(passed=1)


def test_report_header_names_provider_master_versions_and_testbed(pytester):
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest("--theodolite-instance-cpu=0.25")
    result.stdout.fnmatch_lines(
        [
            "theodolite: kafka=embedded (Apache Kafka 4.*, KRaft), spark master=standalone (pyspark *), "
            "max instances=4",
            "theodolite: testbed * cores, * GiB, *; instance CPU: *",
        ]
    )


def test_client_properties_from_ini_and_environment_are_never_printed(pytester, monkeypatch):
    monkeypatch.setenv("THEODOLITE_KAFKA_SASL_PASSWORD", "hunter2-secret")
    pytester.makeini(
        "[pytest]\ntheodolite_kafka_properties =\n  security.protocol=SASL_SSL\n  sasl.mechanism=PLAIN\n"
    )
    pytester.makepyfile("""
        import os

        def test_props(theodolite_settings):
            assert theodolite_settings.kafka_properties == {
                "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                "sasl.password": os.environ["THEODOLITE_KAFKA_SASL_PASSWORD"]}
            assert os.environ["THEODOLITE_KAFKA_SASL_PASSWORD"] not in repr(theodolite_settings)
            assert False, "show the report"
    """)
    result = pytester.runpytest("--kafka", "external", "--kafka-bootstrap", "127.0.0.1:1", "-l")
    result.assert_outcomes(failed=1)
    assert "hunter2" not in result.stdout.str() + result.stderr.str()


def test_malformed_property_line_is_refused():
    with pytest.raises(SettingsError, match=r"theodolite_kafka_properties: 'security\.protocol SASL'"):
        build(lambda flag: None, ["security.protocol SASL"], environ={})


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [
        ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
        ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    ],
)
def test_one_set_of_sasl_properties_serves_java_python_and_librdkafka_clients(mechanism, module):
    """Given as librdkafka does (sasl.username/password), Spark's Java client gets a JAAS config; given as
    Java does, kafka-python and librdkafka get the user and password out of it -- quotes included."""
    from theodolite_generator import librdkafka_config

    password = 'p"w\\x'
    properties = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "gate",
        "sasl.password": password,
    }
    java = client_properties.java_client_config(properties)
    assert java == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="gate" password="p\\"w\\\\x";',
    }
    assert client_properties.java_client_config(java) == java  # a JAAS config given is kept
    for config in (properties, java):
        assert client_properties.python_client_config(config)["sasl_plain_password"] == password
        assert librdkafka_config(config)["sasl.password"] == password
        assert librdkafka_config(config)["sasl.username"] == "gate"
        assert "sasl.jaas.config" not in librdkafka_config(config)


def test_python_client_config_translates_sasl_and_ssl_names():
    config = client_properties.python_client_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="alice" password="pw";',
            "ssl.ca.location": "/ca.pem",
        }
    )
    assert config == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "pw",
        "ssl_cafile": "/ca.pem",
    }
    assert client_properties.redacted({"sasl.jaas.config": "x", "sasl.mechanism": "PLAIN"}) == {
        "sasl.jaas.config": REDACTED,
        "sasl.mechanism": "PLAIN",
    }


def test_one_set_of_ssl_pem_files_serves_java_python_and_librdkafka_clients():
    """Given as librdkafka gives them (PEM files), Spark's Java client gets PEM trust and key stores, kafka-python
    its ssl_* keywords, and no host-name check is each client's own word for it."""
    from theodolite_generator import librdkafka_config

    properties = {
        "security.protocol": "SSL",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.certificate.location": "/etc/kafka/client.pem",
        "ssl.key.location": "/etc/kafka/client.pem",
        "ssl.key.password": "k3y",
        "ssl.endpoint.identification.algorithm": "none",
    }
    client_properties.check(properties)
    assert client_properties.java_client_config(properties) == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/etc/kafka/client.pem",
        "ssl.key.password": "k3y",
        "ssl.endpoint.identification.algorithm": "",
    }
    python = client_properties.python_client_config(properties)
    assert python == {
        "security_protocol": "SSL",
        "ssl_cafile": "/etc/kafka/ca.pem",
        "ssl_certfile": "/etc/kafka/client.pem",
        "ssl_keyfile": "/etc/kafka/client.pem",
        "ssl_password": "k3y",
        "ssl_check_hostname": False,
    }
    # the generator takes the properties as they are (the engine hands them on), or in kafka-python's form
    assert librdkafka_config(properties) == librdkafka_config(python) == properties
    java_form = {"ssl.endpoint.identification.algorithm": ""}
    assert librdkafka_config(java_form) == {"ssl.endpoint.identification.algorithm": "none"}
    checked = {**properties, "ssl.endpoint.identification.algorithm": "https"}
    assert client_properties.java_client_config(checked)["ssl.endpoint.identification.algorithm"] == "https"
    assert client_properties.python_client_config(checked)["ssl_check_hostname"] is True


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        (
            {"ssl.truststore.location": "/t.jks", "ssl.truststore.password": "x"},
            r"ssl\.truststore\.location, ssl\.truststore\.password: Java's key and trust stores.* ssl\.ca\.location",
        ),
        ({"ssl.keystore.location": "/k.p12"}, r"cannot read; give PEM files"),
        (
            {"ssl.certificate.location": "/c.crt", "ssl.key.location": "/c.key"},
            r"must name the same file.*cat client\.key client\.crt > client\.pem",
        ),
        ({"ssl.key.location": "/c.pem"}, r"ssl\.certificate\.location None and ssl\.key\.location '/c\.pem'"),
        ({"ssl.endpoint.identification.algorithm": "yes"}, r"neither 'https' .* nor 'none'"),
    ],
)
def test_ssl_settings_one_of_the_clients_could_not_read_are_refused_saying_what_to_give(properties, message):
    with pytest.raises(
        SettingsError, match=r"Kafka client properties \(theodolite_kafka_properties.*" + message
    ):
        build({}.get, [f"{key}={value}" for key, value in properties.items()], environ={})


@pytest.mark.parametrize(
    "name",
    [
        "sasl.password",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.keystore.key",
        "sasl.oauthbearer.client.credentials",
        "api_key",
        "token",
        "secret",
    ],
)
def test_client_properties_and_results_redact_the_same_secrets(name):
    properties = {name: "s3cr3t", "bootstrap.servers": "b:9092", "keys": "100"}
    assert (
        client_properties.redacted(properties)
        == redact_secrets(properties)
        == {name: REDACTED, "bootstrap.servers": "b:9092", "keys": "100"}
    )


def test_each_kafka_provider_is_chosen_by_the_name_kafka_takes_in_one_place():
    from pytest_theodolite.engine.kafka_providers import PROVIDERS, kafka_provider
    from pytest_theodolite.engine.settings import KAFKA_PROVIDERS

    assert tuple(PROVIDERS) == KAFKA_PROVIDERS  # the names --kafka offers, each with its provider
    for name in KAFKA_PROVIDERS:
        chosen = kafka_provider(TheodoliteSettings(kafka_provider=name, kafka_bootstrap="h:9"))
        assert chosen.name == name
    assert [p.name for p in PROVIDERS.values() if p.starts_broker] == ["embedded", "testcontainers"]


def test_session_spark_settings_come_from_the_ini_file_then_the_command_line(pytester):
    """The ini key's lines first, then each --spark-conf (a later one wins); the executors' number and size and
    Spark Connect are refused with what to do; the registration wait is a setting."""
    pytester.makeini(
        "[pytest]\ntheodolite_spark_conf =\n    spark.yarn.queue=gates\n    spark.driver.port=7078\n"
    )
    pytester.makeconftest(
        """
import pytest
from pytest_theodolite.plugin import SETTINGS_KEY

@pytest.hookimpl(trylast=True)  # after the plugin's, which builds the settings
def pytest_configure(config):
    settings = config.stash[SETTINGS_KEY]
    print("conf", dict(settings.spark_conf), "wait", settings.spark_register_timeout_s)
"""
    )
    result = pytester.runpytest_subprocess(
        "-s",
        "--spark-conf",
        "spark.driver.port=7079",
        "--spark-conf=spark.jars=/opt/hadoop-aws.jar",
        "--spark-register-timeout",
        "300",
    )
    result.stdout.fnmatch_lines(
        [
            "conf {'spark.yarn.queue': 'gates', 'spark.driver.port': '7079', 'spark.jars': '/opt/hadoop-aws.jar'}"
            " wait 300.0"
        ]
    )


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["spark.executor.instances=8"], "sets spark.executor.instances: how many executors"),
        (["spark.cores.max=2"], "sets spark.cores.max"),
        (["spark.remote=sc://host:15002"], "spark.remote=sc://host:15002 asks for a Spark Connect session"),
        (["spark.api.mode=connect"], "spark.api.mode=connect asks for a Spark Connect session"),
        (["queue=gates"], "is not KEY=VALUE with a Spark key"),
    ],
)
def test_a_session_spark_setting_that_would_size_the_executors_or_connect_is_refused(entries, message):
    with pytest.raises(SettingsError, match=message):
        build({}.get, [], environ={}, spark_conf=entries)


def test_a_gates_spark_conf_is_refused_the_same_way():
    from pytest_theodolite import Benchmark
    from pytest_theodolite.engine.markers import GateSpecError, gate_spec
    from theodolite_generator import Workload

    def job(spark, *, bootstrap_servers, input_topic, output_topic, checkpoint_dir, **options):
        pass

    benchmark = Benchmark("b", job, lambda keys: Workload(keys=keys))
    for conf, message in (
        ({"spark.executor.cores": "2"}, "the gate's spark_conf sets spark.executor.cores"),
        ({"spark.api.mode": "Connect"}, "asks for a Spark Connect session"),
    ):
        with pytest.raises(GateSpecError, match=message):
            gate_spec((benchmark,), {"loads": [100], "spark_conf": conf}, {})
    spec = gate_spec((benchmark,), {"loads": [100], "spark_conf": {"spark.sql.shuffle.partitions": 8}}, {})
    assert spec.settings.spark_conf == {"spark.sql.shuffle.partitions": "8"}


@pytest.mark.parametrize(
    "environ",
    [{"SPARK_REMOTE": "sc://h:15002"}, {"SPARK_CONNECT_MODE_ENABLED": "1"}, {"SPARK_API_MODE": "connect"}],
)
def test_the_environment_asking_for_spark_connect_is_named(environ):
    from pytest_theodolite.infra.spark.masters import connect_requested

    [(name, value)] = environ.items()
    assert connect_requested({}, environ) == f"the environment variable {name}={value}"
    assert connect_requested({}, {"SPARK_API_MODE": "classic"}) is None


def test_a_users_jars_come_after_the_kafka_connectors_and_connect_is_refused_before_a_jvm_starts(monkeypatch):
    from pathlib import Path

    from pytest_theodolite.core.errors import TheodoliteSetupError
    from pytest_theodolite.infra.spark.cluster import SparkCluster, session_jars

    connector = [Path("/cache/spark-sql-kafka.jar"), Path("/cache/kafka-clients.jar")]
    assert session_jars(connector, {}) == "/cache/spark-sql-kafka.jar,/cache/kafka-clients.jar"
    assert session_jars(connector, {"spark.jars": "/opt/a.jar, /opt/b.jar"}).endswith(
        "kafka-clients.jar,/opt/a.jar,/opt/b.jar"
    )
    monkeypatch.setenv("SPARK_REMOTE", "sc://somewhere:15002")
    cluster = SparkCluster("spark://nowhere:7077", 1, connector)
    with pytest.raises(
        TheodoliteSetupError, match="SPARK_REMOTE=sc://somewhere:15002 asks for a Spark Connect"
    ):
        with cluster.session(instances=1):
            pass
