"""The SASL_SSL Kafka listener of the chart's ``ci/secure-values.yaml``, seen by a client.

kafka-python over SASL_SSL with PLAIN carrying a Folio token (as KoP does) and
the Secret's CA: ``round_trip`` creates a topic, produces and reads every
record back; ``refuses_anonymous`` checks that a TLS client without SASL gets
nothing. Used by the chart's process test (dev venv) and the image test.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["refuses_anonymous", "round_trip"]

RECORDS = 50
TIMEOUT_S = 30


def round_trip(bootstrap: str, ca: Path, role: str, token: str, topic: str) -> None:
    """Create ``topic`` (2 partitions), produce RECORDS records and read them all back."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: PLC0415
    from kafka.admin import NewTopic  # noqa: PLC0415

    secured = {"bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL",
               "sasl_mechanism": "PLAIN", "sasl_plain_username": role,
               "sasl_plain_password": token, "ssl_cafile": str(ca),
               "request_timeout_ms": TIMEOUT_S * 1000}
    admin = KafkaAdminClient(**secured)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**secured)
    futures = [producer.send(topic, value=b"v%d" % i, partition=i % 2) for i in range(RECORDS)]
    producer.flush(TIMEOUT_S)
    assert all(future.get(TIMEOUT_S).offset >= 0 for future in futures)
    producer.close()
    consumer = KafkaConsumer(**secured, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=TIMEOUT_S * 1000)
    consumer.assign([TopicPartition(topic, partition) for partition in range(2)])
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == RECORDS:
            break
    consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(RECORDS))


def refuses_anonymous(bootstrap: str, ca: Path) -> bool:
    """Whether a TLS client without SASL is refused (a Kafka error, not topics).

    Refused: kafka-python gives up bootstrapping after its connections were
    dropped by the broker (its log names a failed bootstrap attempt), not
    merely because no answer came in time. It retries a refused bootstrap
    with backoff for ``bootstrap_timeout_ms`` (default 30 s); the broker drops
    each attempt within milliseconds, so 3 s.
    """
    import logging  # noqa: PLC0415

    from kafka import KafkaAdminClient  # noqa: PLC0415
    from kafka.errors import KafkaError  # noqa: PLC0415

    failed: list[str] = []

    class _FailedAttempts(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith("Bootstrap") and " failed: " in message:
                failed.append(message)

    manager_log = logging.getLogger("kafka.net.manager")
    handler = _FailedAttempts(logging.WARNING)
    manager_log.addHandler(handler)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SSL",
                                 ssl_cafile=str(ca), request_timeout_ms=10_000,
                                 bootstrap_timeout_ms=3_000)
        try:
            admin.list_topics()
        finally:
            admin.close()
    except KafkaError:
        return bool(failed)
    finally:
        manager_log.removeHandler(handler)
    return False
