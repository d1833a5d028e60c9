"""Issue 22, items 1 and 4: the SDK's state-changing calls after an unknown outcome.

Each test puts a fault wrapper at the client's call seam (``AdminCore._call``
for admin calls, ``Client._call`` for reader groups,
``TransactionalWriter._call``, as ``test_transactional_writer.py`` does for
``Transaction.commit``): the real standalone applies the call, then its answer
is lost the way the IO thread's own wait loses it (``TimeoutError: no answer
within ...``). The old code raised that to the application (or, for a repeat,
got a refusal that only a repeat of an applied call gets); now each call reads
back and reconciles (``folio._unknown``, ``folio._admin_unknown``,
``folio.read._group_calls``). The table is in docs/sdk.md.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from google.protobuf.message import Message

import folio
from folio.api.v1 import admin_pb2, groups_pb2, transactions_pb2
from folio.errors import OutcomeUnknownError


def _lose_admin(client: folio.Client, kind: type[Message], *, applied: bool = True,
                times: int = 1) -> list[str]:
    """``_lose`` at the admin calls' seam, the core's coroutine ``AdminCore._call``
    (both client faces make their admin calls through it)."""
    core = client._admin
    real = core._call
    lost: list[str] = []

    async def losing(method: Any, request: Any, *, retry: bool = False) -> Any:
        if isinstance(request, kind) and len(lost) < times:
            lost.append(type(request).__name__)
            if applied:
                await real(method, request, retry=retry)
            raise TimeoutError("no answer within 35.0 s")
        return await real(method, request, retry=retry)

    core._call = losing  # type: ignore[method-assign]
    return lost


def _lose(owner: Any, kind: type[Message], *, applied: bool = True, times: int = 1,
          attr: str = "_call") -> list[str]:
    """Make ``owner._call`` (or ``attr``) lose the answer of its first ``times`` ``kind`` calls.

    ``applied``: the broker takes the call first (an answer lost on its way
    back), else the call never reaches it (lost on its way there). Returns
    the list the lost calls are recorded in.
    """
    real = getattr(owner, attr)
    lost: list[str] = []

    def losing(method: Any, request: Any, *, retry: bool = False) -> Any:
        if isinstance(request, kind) and len(lost) < times:
            lost.append(type(request).__name__)
            if applied:
                real(method, request, retry=retry)
            raise TimeoutError("no answer within 35.0 s")
        return real(method, request, retry=retry)

    setattr(owner, attr, losing)
    return lost


def _lose_async(owner: Any, kind: type[Message], *, times: int = 1,
                attr: str = "unary") -> list[str]:
    """``_lose`` for a coroutine seam (a reader group's calls, ``_GroupClient.unary``)."""
    real = getattr(owner, attr)
    lost: list[str] = []

    async def losing(method: Any, request: Any, *, retry: bool = False) -> Any:
        if isinstance(request, kind) and len(lost) < times:
            lost.append(type(request).__name__)
            await real(method, request, retry=retry)
            raise TimeoutError("no answer within 35.0 s")
        return await real(method, request, retry=retry)

    setattr(owner, attr, losing)
    return lost


def test_create_topic_whose_answer_is_lost(client: folio.Client) -> None:
    lost = _lose_admin(client, admin_pb2.CreateTopicRequest)
    info = client.create_topic("unk-create", segments=3)  # old: TimeoutError
    assert lost == ["CreateTopicRequest"]
    assert info.name == "unk-create" and len(info.segments) == 3


def test_create_topic_taken_by_another_is_still_refused(client: folio.Client) -> None:
    client.create_topic("unk-taken", segments=2)
    # Lost on the way there: the repeat finds another client's topic (2
    # segments, 3 asked), which is not ours.
    lost = _lose_admin(client, admin_pb2.CreateTopicRequest, applied=False)
    with pytest.raises(folio.TopicExistsError):
        client.create_topic("unk-taken", segments=3)
    assert lost == ["CreateTopicRequest"]


def test_delete_topic_whose_answer_is_lost(client: folio.Client) -> None:
    client.create_topic("unk-delete")
    lost = _lose_admin(client, admin_pb2.DeleteTopicRequest)
    client.delete_topic("unk-delete")  # old: TimeoutError; a bare repeat: TopicNotFoundError
    assert lost == ["DeleteTopicRequest"]
    with pytest.raises(folio.TopicNotFoundError):
        client.get_topic("unk-delete")
    with pytest.raises(folio.TopicNotFoundError):  # without an unknown outcome: refused
        client.delete_topic("unk-delete")


def test_update_topic_config_whose_answer_is_lost(client: folio.Client) -> None:
    client.create_topic("unk-config")
    lost = _lose_admin(client, admin_pb2.UpdateTopicConfigRequest)
    info = client.update_topic_config("unk-config", retention_ms=3_600_000)
    assert lost == ["UpdateTopicConfigRequest"]
    assert info.config.retention_ms == 3_600_000


def test_seal_topic_whose_answer_is_lost(client: folio.Client) -> None:
    client.create_topic("unk-seal", segments=2)
    lost = _lose_admin(client, admin_pb2.SealTopicRequest)
    client.seal_topic("unk-seal")
    assert lost == ["SealTopicRequest"]
    assert all(s.sealed for s in client.get_segments("unk-seal", include_sealed=True))


def test_scale_topic_whose_answer_is_lost(client: folio.Client) -> None:
    (segment,) = client.create_topic("unk-scale").segments
    lost = _lose_admin(client, admin_pb2.ScaleTopicRequest)
    # Old: TimeoutError; a bare repeat: SegmentSealedError.
    result = client.scale_topic("unk-scale", [segment.name], [(0.0, 0.5), (0.5, 1.0)])
    assert lost == ["ScaleTopicRequest"]
    assert [s.name for s in result.sealed] == [segment.name]
    assert [(s.key_low, s.key_high) for s in result.created] == [(0.0, 0.5), (0.5, 1.0)]
    assert [s.name for s in result.created] == [s.name for s in client.get_segments("unk-scale")]


def test_scale_after_an_unknown_outcome_is_not_taken_for_another(client: folio.Client) -> None:
    # The ScaleTopic never arrived; meanwhile the topic was sealed by another
    # client: the repeat's SegmentSealedError is not ours (no successors).
    (segment,) = client.create_topic("unk-scale2").segments
    real = client._admin._call

    async def lost_then_sealed(method: Any, request: Any, *, retry: bool = False) -> Any:
        if isinstance(request, admin_pb2.ScaleTopicRequest) and not sealed:
            sealed.append(await real(client._connection.admin.SealTopic,
                                     admin_pb2.SealTopicRequest(name="unk-scale2")))
            raise TimeoutError("no answer within 35.0 s")
        return await real(method, request, retry=retry)

    sealed: list[Any] = []
    client._admin._call = lost_then_sealed  # type: ignore[method-assign]
    with pytest.raises(folio.SegmentSealedError):
        client.scale_topic("unk-scale2", [segment.name], [(0.0, 0.5), (0.5, 1.0)])
    assert len(sealed) == 1
    assert client.get_successors(segment.name) == []


def test_truncate_segment_whose_answer_is_lost(client: folio.Client) -> None:
    client.create_topic("unk-trunc", ledger_rollover_bytes=1024)
    with client.writer("unk-trunc") as writer:
        for i in range(6):  # one block (and, past 1 KiB, a new ledger) each
            writer.write_event(b"y" * 600 + b"%d" % i)
            writer.flush(30)
    lost = _lose_admin(client, admin_pb2.TruncateSegmentRequest)
    info = client.truncate_segment("unk-trunc/0", 4)  # old: TimeoutError
    assert lost == ["TruncateSegmentRequest"]
    assert 0 < info.segment.start_offset <= 4
    assert client.get_segment_info("unk-trunc/0").segment.start_offset == \
        info.segment.start_offset


def _open_txn(client: folio.Client, topic: str) -> bytes:
    client.create_topic(topic)
    with client.transactional_writer(topic) as writer:
        txn = writer.begin()
        txn.write_event(b"one")
        return txn.detach()


def test_commit_transactions_whose_answer_is_lost(client: folio.Client) -> None:
    txn_id = _open_txn(client, "unk-commit")
    lost = _lose_admin(client, transactions_pb2.CommitTxnRequest)
    assert client.commit_transactions([txn_id]) is True  # old: TimeoutError
    assert lost == ["CommitTxnRequest"]
    assert client.transaction_status(txn_id) is folio.TxnStatus.COMMITTED


def test_keyed_commit_whose_answer_is_lost_is_ours(client: folio.Client) -> None:
    txn_id = _open_txn(client, "unk-commit-key")
    lost = _lose_admin(client, transactions_pb2.CommitTxnRequest)
    # A bare repeat is answered as a duplicate (False): our own lost commit.
    assert client.commit_transactions([txn_id], commit_key="unk-q", commit_sequence=1) is True
    assert lost == ["CommitTxnRequest"]
    assert client.transaction_status(txn_id) is folio.TxnStatus.COMMITTED
    other = _open_txn(client, "unk-commit-key2")
    assert client.commit_transactions([other], commit_key="unk-q", commit_sequence=1) is False


def test_keyed_commit_taken_by_another_committer_is_false(client: folio.Client) -> None:
    # Ours never arrived; another committer committed the key's sequence
    # meanwhile: the repeat is a duplicate, and ours is not committed.
    ours, theirs = _open_txn(client, "unk-key-a"), _open_txn(client, "unk-key-b")
    real = client._admin._call
    other: list[bool] = []

    async def lost(method: Any, request: Any, *, retry: bool = False) -> Any:
        if isinstance(request, transactions_pb2.CommitTxnRequest) and not other:
            other.append((await real(method, transactions_pb2.CommitTxnRequest(
                txn_ids=[theirs], commit_key="unk-q2", commit_sequence=4))).duplicate)
            raise TimeoutError("no answer within 35.0 s")
        return await real(method, request, retry=retry)

    client._admin._call = lost  # type: ignore[method-assign]
    assert client.commit_transactions([ours], commit_key="unk-q2", commit_sequence=4) is False
    assert other == [False]
    assert client.transaction_status(theirs) is folio.TxnStatus.COMMITTED
    assert not client.transaction_status(ours).committed


def test_abort_transaction_whose_answer_is_lost(client: folio.Client) -> None:
    txn_id = _open_txn(client, "unk-abort")
    lost = _lose_admin(client, transactions_pb2.AbortTxnRequest)
    client.abort_transaction(txn_id)  # old: TimeoutError; a bare repeat: TxnStateError
    assert lost == ["AbortTxnRequest"]
    assert client.transaction_status(txn_id) is folio.TxnStatus.ABORTED


def test_abort_transactions_whose_answer_is_lost(client: folio.Client) -> None:
    client.create_topic("unk-sweep")
    with client.transactional_writer("unk-sweep") as writer:
        txn = writer.begin(label="unk-job")
        txn.write_event(b"x")
        txn_id = txn.detach()
    lost = _lose_admin(client, transactions_pb2.AbortTxnsRequest)
    assert client.abort_transactions("unk-job") == []  # old: TimeoutError
    assert lost == ["AbortTxnsRequest"]
    assert client.transaction_status(txn_id) is folio.TxnStatus.ABORTED


def test_begin_whose_answer_is_lost(client: folio.Client) -> None:
    client.create_topic("unk-begin")
    with client.transactional_writer("unk-begin") as writer:
        lost = _lose(writer, transactions_pb2.BeginTxnRequest)
        txn = writer.begin()  # old: TimeoutError (the lost one stays unused; it times out)
        assert lost == ["BeginTxnRequest"]
        txn.write_event(b"x")
        txn.commit()
        assert txn.status() is folio.TxnStatus.COMMITTED


def test_failed_transaction_is_aborted_when_its_abort_is_lost(client: folio.Client) -> None:
    # Transaction._fail's best-effort abort: a single AbortTxn whose
    # TimeoutError escaped in place of TxnFailedError, and a lost abort left
    # the transaction OPEN (holding read_committed) until its timeout.
    client.create_topic("unk-fail")
    with client.transactional_writer("unk-fail", txn_timeout_ms=120_000) as writer:
        txn = writer.begin()
        client.seal_topic("unk-fail")
        lost = _lose(writer, transactions_pb2.AbortTxnRequest, applied=False)
        txn.write_event(b"x")
        with pytest.raises(folio.TxnFailedError):
            txn.flush()
        assert lost == ["AbortTxnRequest"]
        assert txn.status() is folio.TxnStatus.ABORTED


def test_reader_group_writes_whose_answers_are_lost(client: folio.Client) -> None:
    client.create_topic("unk-group", segments=2)
    lost = _lose_admin(client, groups_pb2.CreateReaderGroupRequest)
    group = client.reader_group("unk-g", topics=["unk-group"])  # old: TimeoutError
    assert lost == ["CreateReaderGroupRequest"]
    lost = _lose_async(group._calls, groups_pb2.UpdateReaderGroupRequest)
    # A join (compare-and-set) whose answer is lost: old: TimeoutError; a
    # repeat of the change would find the id in use (ReaderIdInUseError).
    reader = group.reader("r1")
    assert lost == ["UpdateReaderGroupRequest"]
    assert group.online_readers() == ["r1"]
    lost = _lose_async(group._calls, groups_pb2.UpdateReaderGroupRequest)
    group.reader_offline("r1")  # old: TimeoutError; a repeat: ReaderNotInGroupError
    assert lost == ["UpdateReaderGroupRequest"]
    assert group.online_readers() == []
    with contextlib.suppress(folio.FolioError):  # it is out of the group already
        reader.close()
    lost = _lose_admin(client, groups_pb2.DeleteReaderGroupRequest)
    client.delete_reader_group("unk-g")  # old: TimeoutError; a repeat: ReaderGroupNotFoundError
    assert lost == ["DeleteReaderGroupRequest"]
    assert "unk-g" not in client.list_reader_groups()


def test_a_change_under_another_is_reported_unknown(client: folio.Client) -> None:
    # The join's answer is lost and another client changes the group before
    # the read-back: whether ours is in it cannot be told from the version,
    # so the SDK says so instead of joining again.
    client.create_topic("unk-group2")
    group = client.reader_group("unk-g2", topics=["unk-group2"])
    real = group._calls.unary
    calls = {"n": 0}

    async def losing(method: Any, request: Any, *, retry: bool = False) -> Any:
        if isinstance(request, groups_pb2.UpdateReaderGroupRequest) and calls["n"] == 0:
            calls["n"] += 1
            await real(method, request, retry=retry)
            state = (await group._calls.get_async("unk-g2"))[1]
            state.initiate_checkpoint("other")  # another client's change
            await real(method, groups_pb2.UpdateReaderGroupRequest(
                name="unk-g2", expected_version=request.expected_version + 1,
                state=state.to_proto()), retry=retry)
            raise TimeoutError("no answer within 35.0 s")
        return await real(method, request, retry=retry)

    group._calls.unary = losing
    with pytest.raises(OutcomeUnknownError) as raised:
        group.reader("r1")
    assert raised.value.operation == "UpdateReaderGroup unk-g2"
    assert isinstance(raised.value, folio.FolioUnavailableError | TimeoutError)



def test_a_group_readers_lost_sync_is_reconciled_at_the_next(client: folio.Client) -> None:
    # GroupReader's sync reconciles by itself (it reads what the state says it
    # holds at its next sync, reading on meanwhile), so its compare-and-set
    # makes one attempt: its acquiring update is applied, the answer lost.
    client.create_topic("unk-sync", segments=2)
    with client.writer("unk-sync") as writer:
        for n in range(20):
            writer.write_event(b"%d" % n, routing_key=f"k{n}")
        writer.flush()
    group = client.reader_group("unk-gs", topics=["unk-sync"], sync_interval_ms=100)
    with group.reader("r1") as reader:
        lost = _lose_async(group._calls, groups_pb2.UpdateReaderGroupRequest)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            event = reader.read_next(timeout=0.5)
            if event is not None and event.event is not None:
                got.append(event.event.payload)
        assert lost == ["UpdateReaderGroupRequest"]
        assert sorted(got) == sorted(b"%d" % n for n in range(20))
        assert sorted(group.assignment()["r1"]) == ["unk-sync/0", "unk-sync/1"]


def test_closing_a_writer_bounds_its_best_effort_aborts(client: folio.Client) -> None:
    # close(timeout) aborts the open transactions within timeout (None: the
    # transaction timeout, after which the broker aborts them anyway), not 60 s
    # of read-backs per transaction (decide's default), and says which it left
    # undecided (it used to say nothing).
    client.create_topic("unk-close")
    writer = client.transactional_writer("unk-close")
    txn = writer.begin()
    lost = _lose(writer, transactions_pb2.AbortTxnRequest, applied=False, times=1000)
    with pytest.raises(folio.TimeoutError) as raised:
        writer.close(timeout=0.5)  # attempts whose outcome is unknown; old: 60 s of them
    assert raised.value.context["txn_ids"] == [txn.txn_id.hex()]
    assert not raised.value.retriable and writer.closed
    assert lost and set(lost) == {"AbortTxnRequest"}
    assert client.transaction_status(txn.txn_id) is folio.TxnStatus.OPEN
    client.abort_transaction(txn.txn_id)
    assert client.transaction_status(txn.txn_id) is folio.TxnStatus.ABORTED
