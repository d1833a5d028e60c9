"""Fault injection into the coordinator's crash windows: hooks passed in, none built here.

The coordinator's crash windows are written out in prose (``broker.txn.coordinator``),
and tests prove them by killing a real process inside one. The process that a
test starts decides where it dies: it passes a ``TxnFaults`` whose callbacks
run at the named points, through the app wiring
(``broker.app.standalone.run_standalone``). Production passes ``NO_TXN_FAULTS``:
every hook None, one attribute test at each point, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["NO_TXN_FAULTS", "TxnFaults"]


@dataclass(frozen=True, slots=True)
class TxnFaults:
    """Callbacks at the coordinator's crash windows; None: nothing happens there.

    Attributes:
        after_committing_logged: runs once a ``CommitTxn``'s COMMITTING record
            is durable and before any commit marker is written (a test process
            exits here, so that the next start must finish the commit).
    """

    after_committing_logged: Callable[[], None] | None = None


#: What production runs with: no hook anywhere.
NO_TXN_FAULTS = TxnFaults()
