"""Idempotent commits: CommitTxn with a commit key and sequence, on a real standalone.

A Spark streaming sink commits each micro-batch with (query id, batch id); a
batch replayed after a restart must commit nothing. Also: transactions handed
over by id (``Transaction.detach``) and committed or aborted elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import folio
from tests.spark._topics import payloads as _visible
from tests.support.bookies import BookieProcesses
from tests.support.standalone import start_standalone


def _detached(client: folio.Client, topic: str, *payloads: bytes) -> bytes:
    writer = client.transactional_writer(topic)
    txn = writer.begin()
    for payload in payloads:
        txn.write_event(payload, routing_key=payload.decode())
    txn_id = txn.detach()
    writer.close()  # leaves the detached transaction open
    return txn_id


def test_a_repeated_commit_key_and_sequence_commits_nothing(client: folio.Client) -> None:
    client.create_topic("ck-repeat", segments=2)
    first = _detached(client, "ck-repeat", b"a", b"b")
    assert client.transaction_status(first) == "OPEN"
    assert client.commit_transactions([first], commit_key="query-1", commit_sequence=0)
    assert client.transaction_status(first) == "COMMITTED"

    replay = _detached(client, "ck-repeat", b"a2", b"b2")
    assert not client.commit_transactions([replay], commit_key="query-1", commit_sequence=0)
    assert client.transaction_status(replay) == "ABORTED"

    later = _detached(client, "ck-repeat", b"c")
    assert client.commit_transactions([later], commit_key="query-1", commit_sequence=1)
    older = _detached(client, "ck-repeat", b"old")
    assert not client.commit_transactions([older], commit_key="query-1", commit_sequence=0)
    # Another key has its own sequences.
    other = _detached(client, "ck-repeat", b"d")
    assert client.commit_transactions([other], commit_key="query-2", commit_sequence=0)
    assert _visible(client, "ck-repeat") == [b"a", b"b", b"c", b"d"]


def test_several_detached_transactions_commit_as_one(client: folio.Client) -> None:
    client.create_topic("ck-several", segments=3)
    ids = [_detached(client, "ck-several", f"k{n}".encode()) for n in range(3)]
    # Written but open: read_committed readers would wait at them; read_uncommitted sees them.
    assert _visible(client, "ck-several", "read_uncommitted") == [b"k0", b"k1", b"k2"]
    assert client.commit_transactions(ids)
    assert [client.transaction_status(i) for i in ids] == ["COMMITTED"] * 3
    assert _visible(client, "ck-several") == [b"k0", b"k1", b"k2"]
    aborted = _detached(client, "ck-several", b"gone")
    client.abort_transaction(aborted)
    assert client.transaction_status(aborted) == "ABORTED"
    with pytest.raises(folio.TxnStateError):
        client.commit_transactions([aborted])
    assert _visible(client, "ck-several") == [b"k0", b"k1", b"k2"]


def test_a_refused_keyed_commit_leaves_the_sequence_free(client: folio.Client) -> None:
    client.create_topic("ck-refused", segments=1)
    with pytest.raises(folio.TxnNotFoundError):
        client.commit_transactions([b"\x01" * 16], commit_key="q", commit_sequence=5)
    with pytest.raises(folio.InvalidArgumentError, match="commit_sequence must be >= 0"):
        client.commit_transactions([b"\x01" * 16], commit_key="q", commit_sequence=-1)
    good = _detached(client, "ck-refused", b"x")
    assert client.commit_transactions([good], commit_key="q", commit_sequence=5)
    assert _visible(client, "ck-refused") == [b"x"]


def test_commit_keys_survive_a_restart(tmp_path: Path) -> None:
    processes = BookieProcesses()
    try:
        server = start_standalone(processes, tmp_path / "data")
        with folio.Client(server.address) as client:
            client.create_topic("ck-restart", segments=1)
            first = _detached(client, "ck-restart", b"once")
            assert client.commit_transactions([first], commit_key="q", commit_sequence=7)
        server.terminate()
        server = start_standalone(processes, tmp_path / "data")
        with folio.Client(server.address) as client:
            replay = _detached(client, "ck-restart", b"twice")
            assert not client.commit_transactions([replay], commit_key="q", commit_sequence=7)
            assert _visible(client, "ck-restart") == [b"once"]
        server.terminate()
    finally:
        processes.kill_all()
