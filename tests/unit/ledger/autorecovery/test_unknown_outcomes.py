"""Auto-recovery's ledger lock when ZooKeeper's answer is lost (issue 22): ours is ours."""

from __future__ import annotations

import pytest

from ledger.autorecovery.marks import UnderReplicationMarks
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore

pytestmark = pytest.mark.faults


async def test_a_lock_whose_answer_was_lost_is_held(store: RocksDBMetadataStore) -> None:
    faulty = FaultyMetadataStore(store)
    marks = UnderReplicationMarks(faulty)
    fired = faulty.fail("create", lambda path: "/locks/" in path, Fault.LOST_ANSWER)
    assert await marks.claim(7, "bookie-1")  # created: ours, though the answer was lost
    assert len(fired) == 1
    assert await marks.claim(7, "bookie-1")  # retried: the node is ours
    assert not await marks.claim(7, "bookie-2")  # another worker's: refused
    faulty.fail("create", lambda path: "/locks/" in path, Fault.BEFORE)
    assert not await marks.claim(8, "bookie-1")  # not created: not held
    assert await marks.claim(8, "bookie-1")
