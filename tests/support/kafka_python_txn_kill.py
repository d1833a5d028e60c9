"""kafka-python's transactional producer across a broker's SIGKILL, as a process.

Usage: ``python -m tests.support.kafka_python_txn_kill BOOTSTRAP TOPIC PARTITIONS``
(run by ``tests/cluster/test_kafka_cluster_txn_kill.py``, as ``txn_kill.js`` is
for kafkajs). Writes ``kp-across-<p>-<i>`` in a transaction, prints
``{"phase": "sent"}`` and waits for a line on stdin (the test kills the
transaction coordinator's broker then), writes ``kp-across-after-<p>-<i>`` in
the same transaction and ends it; then commits ``kp-after-<p>-<i>``. Last line:
``{"outcomes": {name: "committed" | "aborted" | "unknown"}}``.

kafka-python 3.0.12 never looks its transaction coordinator up again once that
broker is gone (``Sender``: ``await_ready`` raises, so
``lookup_coordinator_for_request`` is never reached; it retries the dead node
for ever) and its ``commit_transaction`` has no timeout: the call runs in a
thread, and one still waiting after ``STUCK_END_S`` is "unknown" (a new
producer's InitProducerId at the new coordinator then aborts the transaction
if it is still open). The process leaves with ``os._exit``: the stuck call's
thread and its connections to the dead broker end with it, not in the test's
process.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from kafka import KafkaProducer
from kafka.errors import KafkaError

#: How long each send and an ending at a living coordinator may take.
DEADLINE_S = 90.0

#: How long the ending whose coordinator was killed is given: the coordinator
#: moves within seconds, but kafka-python's call never finishes (above).
STUCK_END_S = 20.0


def _values(prefix: str, partitions: int) -> list[tuple[int, bytes]]:
    return [(p, b"%s-%d-%d" % (prefix.encode(), p, i))
            for p in range(partitions) for i in range(3)]


def _end(producer: KafkaProducer, commit: bool, wait_s: float) -> str:
    """Commit (or abort) the open transaction as an application would; its outcome."""
    outcome: list[str] = []

    def end() -> None:
        try:
            if commit:
                producer.commit_transaction()
                outcome.append("committed")
                return
        except KafkaError:
            pass
        try:
            producer.abort_transaction()
            outcome.append("aborted")
        except KafkaError:
            outcome.append("unknown")

    ending = threading.Thread(target=end, daemon=True)
    ending.start()
    ending.join(wait_s)
    return outcome[0] if outcome else "unknown"


def _new_producer(bootstrap: str) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","),
                             transactional_id="kp-kill", transaction_timeout_ms=120_000)
    producer.init_transactions()
    return producer


def main(bootstrap: str, topic: str, partitions: int) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    producer = _new_producer(bootstrap)
    producer.begin_transaction()
    for future in [producer.send(topic, value=value, partition=p)
                   for p, value in _values("kp-across", partitions)]:
        future.get(DEADLINE_S)  # acknowledged by every owner, then the kill
    print(json.dumps({"phase": "sent"}), flush=True)
    sys.stdin.readline()
    sent = True
    try:
        for future in [producer.send(topic, value=value, partition=p)
                       for p, value in _values("kp-across-after", partitions)]:
            future.get(DEADLINE_S)
    except KafkaError:
        sent = False
    outcomes["kp-across"] = outcomes["kp-across-after"] = _end(producer, sent, STUCK_END_S)
    if outcomes["kp-across"] == "unknown":  # stuck or fatal: a new producer (re-init)
        producer = _new_producer(bootstrap)
    producer.begin_transaction()
    for p, value in _values("kp-after", partitions):
        producer.send(topic, value=value, partition=p)
    outcomes["kp-after"] = _end(producer, True, DEADLINE_S)
    producer.close(timeout=5)
    return outcomes


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    print(json.dumps({"outcomes": result}), flush=True)
    os._exit(0)
