"""Auto-recovery: restore the write quorum of ledgers whose bookie is lost for good.

BookKeeper's autorecovery, for Folio clusters on ZooKeeper. A bookie missing
from the live ones (``/bookies/available``) for longer than a grace period is
*lost*; the elected auditor (``auditor``) marks every ledger whose ensembles
name it as under-replicated (``marks``: persistent nodes, so the work
survives crashes); workers lock marked ledgers one at a time (ephemeral
locks) and re-replicate them (``replicator``): the lost bookie's entries of
each closed fragment (``fragments``) are copied from the surviving bookies of
their write sets to a replacement, which then takes the lost bookie's place
in the ledger's metadata by compare-and-set. Every ``folio bookie
--metadata-url`` runs a worker (``worker``); ``AutoRecoveryConfig`` holds the
settings. docs/cluster.md ("Auto-recovery") says what happens to open ledgers.
"""

from ledger.autorecovery.auditor import Auditor
from ledger.autorecovery.config import AutoRecoveryConfig
from ledger.autorecovery.fragments import Fragment, fragments_with, replace_bookie
from ledger.autorecovery.marks import Mark, UnderReplicationMarks
from ledger.autorecovery.replicator import ReplicationResult, replicate_ledger
from ledger.autorecovery.worker import AutoRecoveryWorker

__all__ = [
    "Auditor",
    "AutoRecoveryConfig",
    "AutoRecoveryWorker",
    "Fragment",
    "Mark",
    "ReplicationResult",
    "UnderReplicationMarks",
    "fragments_with",
    "replace_bookie",
    "replicate_ledger",
]
