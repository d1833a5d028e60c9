"""SCRAM credentials in the metadata store: one node, changed by compare-and-set, read on demand.

Every credential lives in one node, ``/folio/kafka/scram`` (versioned JSON:
per user, per mechanism, the salt, StoredKey, ServerKey and iteration
count, base64), so a change is one atomic compare-and-set and every broker
of a cluster reads the same table, as the grants (``broker.auth.acl_store``)
do. A SCRAM exchange reads the node when it starts (one read per
authentication, not per request), so a user made or deleted through any
broker counts on every broker at once, with no watch to lag behind.

Outcomes of a change: the compare-and-set either applied (yes), lost to
another writer (``BadVersionError``: read again and re-apply, bounded), or
failed with the store unreachable (``MetadataUnavailableError``: maybe
applied). The last is passed up: AlterUserScramCredentials answers it with a
retriable error, and the client's retry is idempotent (an upsert of the same
salted password, a delete answered RESOURCE_NOT_FOUND when already done).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from typing import Any, Final

from broker.kafka.sasl.scram import SCRAM_HASHES, ScramCredential
from broker.metadata_paths import SCRAM_PATH
from ledger.api import MetadataStore
from ledger.errors import BadVersionError, NodeExistsError, NoNodeError
from ledger.records import dump_record, load_record

__all__ = ["SCRAM_PATH", "ScramCredentialStore", "ScramTable", "decode_table", "encode_table"]

_FORMAT: Final = 1
#: Compare-and-set attempts before a change gives up (others changing it meanwhile).
_MAX_ATTEMPTS: Final = 20

#: user -> mechanism -> credential.
ScramTable = dict[str, dict[str, ScramCredential]]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode_table(table: ScramTable) -> bytes:
    """The node's bytes for ``table``."""
    users = {user: {mechanism: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                                "server_key": _b64(c.server_key), "iterations": c.iterations}
                    for mechanism, c in sorted(mechanisms.items())}
             for user, mechanisms in sorted(table.items()) if mechanisms}
    return dump_record(_FORMAT, {"users": users})


def decode_table(data: bytes) -> ScramTable:
    """The table in a node's bytes (empty bytes: no users). ``ValueError`` if malformed."""
    if not data:
        return {}
    try:
        # Earlier builds kept the version under "format" (ledger.records).
        raw: Any = load_record(data, SCRAM_PATH, (_FORMAT,), legacy_key="format")
        table: ScramTable = {}
        for user, mechanisms in raw["users"].items():
            table[user] = {
                mechanism: ScramCredential(
                    mechanism, base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]), int(c["iterations"]))
                for mechanism, c in mechanisms.items() if mechanism in SCRAM_HASHES}
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise ValueError(f"{SCRAM_PATH} is not a SCRAM credential table ({error})") from None
    return table


class ScramCredentialStore:
    """Reads and changes the SCRAM credentials of the cluster (see the module docstring)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def read(self) -> ScramTable:
        """Every credential now (``MetadataUnavailableError`` if the store is unreachable)."""
        try:
            node = await self._store.get(SCRAM_PATH)
        except NoNodeError:
            return {}
        return decode_table(node.data)

    async def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        """``user``'s credential for ``mechanism``, None if it has none."""
        return (await self.read()).get(user, {}).get(mechanism)

    async def change(self, edit: Callable[[ScramTable], ScramTable]) -> ScramTable:
        """Apply ``edit`` to the table by compare-and-set (re-applied if another won)."""
        for _attempt in range(_MAX_ATTEMPTS):
            try:
                node = await self._store.get(SCRAM_PATH)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    await self._store.create(SCRAM_PATH, encode_table({}), make_parents=True)
                continue
            changed = edit(decode_table(node.data))
            try:
                await self._store.set(SCRAM_PATH, encode_table(changed), node.version)
            except (BadVersionError, NoNodeError):
                continue  # another broker changed it meanwhile: apply to the new one
            return changed
        raise BadVersionError(SCRAM_PATH, -1, None)  # changed too often meanwhile
