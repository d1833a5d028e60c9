"""Placement and node ids are the same in every process, whatever its hash salt.

A broker computes a segment's container, a group's coordinator container and
a Kafka node id; every other broker, restarted or not, must compute the same.
Comparing a call with itself in one process proves nothing (the salted
``hash()`` would pass), so each value is computed in fresh interpreters with
different ``PYTHONHASHSEED``s and compared with values pinned here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_SCRIPT = """
import json
from broker.cluster.containers import container_of as segment_container
from broker.kafka.locator import container_of as key_container
from broker.kafka.nodes import node_id_of
print(json.dumps({
    "node": node_id_of("b1:7070"),
    "group": key_container(0, "g", 16),
    "txn": key_container(1, "tx", 16),
    "segment": segment_container("orders/0", 16),
    "spread": sorted({key_container(0, f"group-{i}", 16) for i in range(200)}),
}))
"""

#: CRC-32 (IEEE) of the names: what every version and language computes.
PINNED = {"node": 1522221965, "group": 0, "txn": 2, "segment": 2, "spread": list(range(16))}


@pytest.mark.processes
@pytest.mark.parametrize("seed", ["0", "1", "4242"])
def test_the_same_values_in_a_process_with_another_hash_seed(seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    result = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, check=True,
                            capture_output=True, timeout=60)
    assert json.loads(result.stdout) == PINNED
