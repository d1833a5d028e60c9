"""Transaction labels through the SDK against a real standalone: ``begin(label=...)`` and
``Client.abort_transactions(label, keep)`` (the sweep of a job's lost transactions).

A "job" begins one labelled transaction per "task", each detached; only some
ids reach the "driver", which commits them and sweeps the label: the others
are aborted at once, so a read_committed reader of their segments is not held
until their timeout, and transactions of other labels (or none) are left open.
"""

from __future__ import annotations

import time

import pytest

import folio

READ_TIMEOUT_S = 30.0


def _read_committed(client: folio.Client, topic: str, want: int) -> list[bytes]:
    """The first ``want`` events a read_committed reader gets (fails if not in time)."""
    got: list[bytes] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    with client.reader(topic, isolation="read_committed") as reader:
        while len(got) < want:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"read_committed got {got} in {READ_TIMEOUT_S} s: held"
            event = reader.read_next(timeout=remaining)
            if event is not None:
                got.append(event.payload)
    return got


def test_a_sweep_aborts_the_open_transactions_of_the_label_but_those_kept(
        client: folio.Client) -> None:
    client.create_topic("labels", segments=2)
    with client.transactional_writer("labels", txn_timeout_ms=3_600_000) as writer:
        tasks = []
        for task in range(4):
            txn = writer.begin(label="job-1")
            for n in range(10):  # keys over both segments
                txn.write_event(f"task{task}-{n}".encode(), routing_key=f"k{n}")
            tasks.append(txn.detach())
        other = writer.begin(label="job-2")
        other.write_event(b"other", routing_key="k0")
        other_id = other.detach()
        unlabelled = writer.begin()
        unlabelled.write_event(b"unlabelled", routing_key="k1")
        unlabelled.flush()
    # Only tasks 0 and 1 reached the driver: it commits them, then sweeps the label.
    delivered = tasks[:2]
    assert client.commit_transactions(delivered)
    assert sorted(client.abort_transactions("job-1", keep=delivered)) == sorted(tasks[2:])
    assert [client.transaction_status(t) for t in tasks] == \
        ["COMMITTED", "COMMITTED", "ABORTED", "ABORTED"]
    assert client.abort_transactions("job-1") == []  # nothing open is left
    assert client.transaction_status(other_id) == "OPEN"
    assert unlabelled.status() == "ABORTED"  # closing its writer aborted it
    client.abort_transaction(other_id)
    # Closing a label: nothing may begin with it any more (a straggler of the job).
    with client.transactional_writer("labels") as writer:
        straggler = writer.begin(label="job-2")
        assert client.abort_transactions("job-2", close=True) == [straggler.txn_id]
        with pytest.raises(folio.TxnFailedError, match="'job-2' is closed"):
            writer.begin(label="job-2")
        writer.begin(label="job-1").abort()  # job-1 was swept, not closed
    # Nothing holds a read_committed reader: an event written now is read at once.
    with client.writer("labels") as plain:
        plain.write_event(b"after", routing_key="k0")
        plain.write_event(b"after", routing_key="k1")
        plain.flush()
    expected = sorted([f"task{t}-{n}".encode() for t in (0, 1) for n in range(10)]
                      + [b"after", b"after"])
    assert sorted(_read_committed(client, "labels", len(expected))) == expected


def test_bad_labels_are_refused(client: folio.Client) -> None:
    client.create_topic("labels-bad", segments=1)
    with pytest.raises(folio.InvalidArgumentError, match="needs a label"):
        client.abort_transactions("")
    with pytest.raises(folio.InvalidArgumentError, match="at most 256 bytes"):
        client.abort_transactions("x" * 257)
    with pytest.raises(folio.InvalidArgumentError, match="16 bytes"):
        client.abort_transactions("job", keep=[b"short"])
    with client.transactional_writer("labels-bad") as writer:
        with pytest.raises(folio.InvalidArgumentError, match="at most 256 bytes"):
            writer.begin(label="é" * 129)
        txn = writer.begin(label="é" * 128)  # 256 bytes
        assert client.abort_transactions("é" * 128) == [txn.txn_id]
        assert txn.status() == "ABORTED"
