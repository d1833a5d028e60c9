"""Deleting a ledger over the bookie's gRPC service: reads find nothing, adds are refused.

Uses ``test_bookie_grpc``'s served bookie (a real ``Bookie`` on RocksDB behind
``start_bookie_server`` on a loopback port).
"""

from __future__ import annotations

import pytest

from ledger.errors import LedgerDeletedError, NoSuchLedgerError
from tests.integration.test_bookie_grpc import Served, _add, served

__all__ = ["served"]  # the fixture, imported to be found here


async def test_delete_then_read_is_no_such_ledger(served: Served) -> None:
    client = served.client
    await client.add_entries(_add(8, [b"a", b"b"]))

    await client.delete_ledger(8)

    with pytest.raises(NoSuchLedgerError) as missing:
        await client.read_entries(8, 0, 1)
    assert missing.value.ledger_id == 8
    with pytest.raises(NoSuchLedgerError):
        await client.read_last_add_confirmed(8)
    await client.delete_ledger(8)  # idempotent


async def test_an_add_after_delete_is_refused_as_deleted_over_the_wire(served: Served) -> None:
    client = served.client
    await client.add_entries(_add(10, [b"a"]))
    await client.fence(10)
    await client.delete_ledger(10)

    with pytest.raises(LedgerDeletedError) as refused:  # a LedgerFencedError: writers stop
        await client.add_entries(_add(10, [b"b"], first_entry_id=1, length_before=1))
    assert refused.value.ledger_id == 10
    with pytest.raises(LedgerDeletedError):
        await client.fence(10)
    assert 10 not in served.bookie.ledger_ids()
