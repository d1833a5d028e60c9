"""Idempotent commits: ``CommitTxn`` with a ``commit_key`` and ``commit_sequence``.

A committer that may repeat a commit after a crash (a Spark streaming query
replays its last micro-batch on restart, with new transactions) names each
commit by a key (the query) and a sequence (the batch). ``CommitKeys`` keeps,
per key, one record in the compacted system topic ``_txncommitkeys``: the
latest sequence, its transaction ids and whether its commit is done.

``commit(key, sequence, txn_ids)``:

1. A done record with a sequence >= ``sequence`` (or any record with a
   higher one): a duplicate. The given transactions are aborted (best
   effort) and nothing is committed.
2. A not-done record with the same sequence (an earlier attempt stopped
   between its intent and its end): if the coordinator says its
   transactions committed (COMMITTING or COMMITTED), it is marked done and
   this call is a duplicate; otherwise its still-open transactions are
   aborted and this call goes on.
3. Record the intent (sequence, txn ids, not done), commit through the
   coordinator (one COMMITTING record decides), record it done.

``start`` (after the coordinator replayed its log) settles the intents a
crash left behind, so the coordinator's decision is known here before its
finished transactions are forgotten. If an intent's transactions are
forgotten all the same, ``commit`` of that sequence raises
``TxnStateError`` (the outcome cannot be told) instead of guessing.

Txn ids are ``txnbuffer.api.TxnId`` here; the record spells them in hex
(``txnbuffer.txn_ids``), as ``bytes.hex()`` of the wire form did before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from broker.errors import (
    CorruptDataError,
    InvalidArgumentError,
    TxnNotFoundError,
    TxnStateError,
)
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator, TxnState
from ledger.records import dump_record, load_record
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_hex, txn_id_hex

__all__ = ["COMMIT_KEYS_TOPIC", "MAX_COMMIT_KEY_BYTES", "CommitKeys"]

log = logging.getLogger(__name__)

COMMIT_KEYS_TOPIC = "_txncommitkeys"
#: Longest commit key accepted, in UTF-8 bytes.
MAX_COMMIT_KEY_BYTES = 256
_VERSION = 1
_COMMITTED = frozenset({TxnState.COMMITTING, TxnState.COMMITTED})


@dataclass(frozen=True, slots=True)
class _Record:
    sequence: int
    txns: tuple[TxnId, ...]
    done: bool

    def encode(self) -> bytes:
        return dump_record(_VERSION, {"sequence": self.sequence,
                                      "txns": [txn_id_hex(t) for t in self.txns],
                                      "done": self.done}, legacy_key="v")

    @staticmethod
    def decode(key: str, value: bytes) -> _Record:
        # Earlier builds kept the version under "v" (ledger.records).
        data = load_record(value, f"commit key record {key!r}", (_VERSION,), legacy_key="v")
        return _Record(int(data["sequence"]),
                       tuple(txn_id_from_hex(t) for t in data["txns"]), bool(data["done"]))


class CommitKeys:
    """The commit keys of a broker, on ``topics``, committing through ``coordinator``."""

    def __init__(self, topics: TopicManager, coordinator: TxnCoordinator) -> None:
        self._log = CompactedTopic(topics, COMMIT_KEYS_TOPIC)
        self._coordinator = coordinator
        self._records: dict[str, _Record] = {}
        #: Keys whose record could not be read: why (with its position).
        self._quarantined: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._loaded = False
        self._load_lock = asyncio.Lock()

    async def start(self) -> None:
        """Load the records; mark done the intents whose transactions committed.

        A record that cannot be read puts its key in quarantine (logged at
        ERROR): commits under that key are refused (``CorruptDataError``) rather
        than risk committing a sequence a second time; other keys work as ever.
        """
        for key, value in (await self._log.read_prefix("")).items():
            try:
                self._records[key] = _Record.decode(key, value)
            except (ValueError, KeyError, TypeError) as error:
                where = (f"offset {self._log.offset_of(key)} of segment "
                         f"{self._log.segment_name}")
                self._quarantined[key] = f"{type(error).__name__}: {error} ({where})"
                log.error("commit keys: the record of commit key %r at %s is unreadable "
                          "(%s: %s); commits under that key are refused from now on",
                          key, where, type(error).__name__, error)
        self._loaded = True
        for key, record in list(self._records.items()):
            if not record.done and self._committed(record) is True:
                log.info("commit %d of key %r was committed before a restart", record.sequence,
                         key)
                await self._write(key, _Record(record.sequence, record.txns, True))

    async def take_over(self) -> None:
        """Forget the records and load them again (cluster: the coordinator moved here)."""
        async with self._load_lock:
            self._records.clear()
            self._quarantined.clear()
            self._loaded = False
            self._log.forget()
            await self.start()

    async def commit(self, key: str, sequence: int, txn_ids: Sequence[TxnId]) -> bool:
        """Commit ``txn_ids`` as ``(key, sequence)``; False when that was committed before."""
        if len(key.encode()) > MAX_COMMIT_KEY_BYTES:
            raise InvalidArgumentError(f"commit_key is longer than {MAX_COMMIT_KEY_BYTES} bytes")
        if sequence < 0:
            raise InvalidArgumentError(f"commit_sequence must be >= 0, got {sequence}")
        if not txn_ids:
            raise InvalidArgumentError("CommitTxn needs at least one txn_id")
        async with self._load_lock:
            if not self._loaded:
                await self.start()
        if key in self._quarantined:
            raise CorruptDataError(
                f"the record of commit key {key[:64]!r} in {COMMIT_KEYS_TOPIC} is unreadable "
                f"({self._quarantined[key]}): which of its sequences were committed is "
                "unknown, so commits under this key are refused rather than risk a "
                "duplicate; commit under a new key", what="commit key record")
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            record = self._records.get(key)
            if record is not None and (record.sequence > sequence
                                       or (record.sequence == sequence and record.done)):
                await self._abort(txn_ids)
                return False
            if record is not None and record.sequence == sequence:
                committed = self._committed(record)
                if committed is None:
                    # Its transactions finished so long ago that the coordinator
                    # forgot them: whether commit `sequence` of `key` happened is unknown.
                    raise TxnStateError(txn_id_hex(record.txns[0]), "COMMITTED or ABORTED",
                                        "FORGOTTEN")
                if committed:
                    await self._write(key, _Record(sequence, record.txns, True))
                    await self._abort(txn_ids)
                    return False
                await self._abort(record.txns)
            unique = tuple(dict.fromkeys(txn_ids))
            for txn_id in unique:  # refused as the coordinator would, before the intent
                state = self._coordinator.status(txn_id).state
                if state is not TxnState.OPEN:
                    raise TxnStateError(txn_id_hex(txn_id), TxnState.OPEN.name, state.name)
            await self._write(key, _Record(sequence, unique, False))
            await self._coordinator.commit(unique)
            await self._write(key, _Record(sequence, unique, True))
            return True

    def _committed(self, record: _Record) -> bool | None:
        """Whether the record's transactions committed; None when none is known any more."""
        known = False
        for txn_id in record.txns:
            try:
                state = self._coordinator.status(txn_id).state
            except TxnNotFoundError:
                continue
            known = True
            if state in _COMMITTED:
                return True
        return False if known else None

    async def _abort(self, txn_ids: Sequence[TxnId]) -> None:
        """Abort the transactions still open (best effort: the others are left as they are)."""
        for txn_id in txn_ids:
            with contextlib.suppress(TxnNotFoundError, TxnStateError):
                await self._coordinator.abort(txn_id)

    async def _write(self, key: str, record: _Record) -> None:
        await self._log.write(key, record.encode())
        self._records[key] = record
