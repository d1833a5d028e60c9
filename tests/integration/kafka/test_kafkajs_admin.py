"""kafkajs, a Node.js Kafka client, on Folio's admin APIs (docs/kafka.md, "Admin APIs").

``tests/kafkajs/admin.js`` runs kafkajs's admin client (and a producer) against
the module's standalone and prints what it saw as JSON: DescribeCluster,
CreateTopics with a config, DescribeConfigs of the topic and the broker (with
sources; with synonyms when asked), AlterConfigs, DeleteRecords,
CreatePartitions (one split; growing by one refused). kafkajs is pinned in
``tests/kafkajs/package.json`` and its lock file; ``npm ci`` installs it there
once (from the npm registry) when it is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address
from tests.support.kafkajs import kafkajs_folder

#: Kafka's ConfigSource numbers as kafkajs reports them.
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


@pytest.fixture(scope="module")
def kafkajs() -> Path:
    """The folder with kafkajs installed (``npm ci`` the first time)."""
    return kafkajs_folder()


def _run(kafkajs: Path, bootstrap: str, topic: str) -> Any:
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run([node, str(kafkajs / "admin.js"), bootstrap, topic],
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout)


def test_kafkajs_admin_client(server: BookieProcess, kafkajs: Path) -> None:
    host, port = kafka_address(server)
    topic = f"kjs.{uuid.uuid4().hex[:8]}"
    seen = _run(kafkajs, f"{host}:{port}", topic)

    assert [(b["nodeId"], b["host"], b["port"]) for b in seen["cluster"]["brokers"]] \
        == [(0, host, port)]
    assert seen["cluster"]["clusterId"] == "folio"
    assert seen["created"] is True

    topic_configs, broker_configs = seen["configs"]
    assert topic_configs["error"] == 0 and broker_configs["error"] == 0
    entries = topic_configs["entries"]
    assert (entries["retention.ms"]["value"], entries["retention.ms"]["source"]) \
        == ("3600000", TOPIC_CONFIG)
    assert (entries["max.message.bytes"]["value"], entries["max.message.bytes"]["source"]) \
        == ("1048576", DEFAULT_CONFIG)
    broker = broker_configs["entries"]
    assert broker["advertised.listeners"]["value"] == f"PLAINTEXT://{host}:{port}"
    assert broker["advertised.listeners"]["source"] == STATIC_BROKER_CONFIG
    assert broker["broker.id"]["readOnly"] is True
    # Asked includeSynonyms: the topic's override, then the broker's default by its name.
    topic_synonyms, broker_synonyms = seen["synonyms"]
    assert topic_synonyms == {
        "retention.ms": [["retention.ms", "3600000", TOPIC_CONFIG],
                         ["log.retention.ms", "-1", DEFAULT_CONFIG]],
        "max.message.bytes": [["message.max.bytes", "1048576", DEFAULT_CONFIG]]}
    assert broker_synonyms == {"broker.id": [["broker.id", "0", STATIC_BROKER_CONFIG]]}

    # AlterConfigs replaces the whole set: retention.ms, not named, is back to its default.
    assert seen["altered"] == {"max.message.bytes": "500000", "retention.ms": "-1"}
    # DeleteRecords to the high watermark: 4 records gone, the log starts at 4.
    (offsets,) = seen["offsetsAfterDelete"]
    assert (offsets["partition"], offsets["low"], offsets["high"]) == (0, "4", "4")
    # CreatePartitions 1 -> 3 is one split; 3 -> 4 (one more) is refused with the reason.
    assert seen["partitions"] == [0, 1, 2]
    assert seen["growByOne"] == "INVALID_PARTITIONS"
