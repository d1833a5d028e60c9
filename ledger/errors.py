"""The ledger service's errors: one small hierarchy, each class says whether a retry can help.

``ledger/status.py`` maps them to gRPC status codes and back, as data.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every ledger-service error.

    Attributes:
        retriable: whether the same call may succeed later unchanged.
        ledger_id: the ledger concerned, when there is one.
    """

    retriable = False

    def __init__(self, message: str, *, ledger_id: int | None = None) -> None:
        super().__init__(message)
        self.ledger_id = ledger_id


class InvalidArgumentError(LedgerError):
    """A request that can never succeed: negative ids, bad quorum sizes, garbage."""


class NoSuchLedgerError(LedgerError):
    """The ledger does not exist (in the metadata store, or on this bookie)."""


class NoSuchEntryError(LedgerError):
    """The entry does not exist, or lies beyond what the reader may see."""


class LedgerFencedError(LedgerError):
    """The ledger was fenced by a recovery: its old writer may add nothing more."""


class LedgerDeletedError(LedgerFencedError):
    """The ledger was deleted: fenced for ever, its id never takes an entry again.

    A bookie answers it to an add (or a fence) of a ledger it holds a tombstone
    for. Over the wire it travels as ``LedgerFencedError`` (its nearest mapped
    class), so a peer of any version refuses to count the add as stored.
    """


class LedgerClosedError(LedgerError):
    """The ledger is closed (sealed); it takes no more adds."""


class EntryTooLargeError(LedgerError):
    """An entry above the configured size limit; split it above the ledger layer."""

    def __init__(self, size: int, limit: int, *, ledger_id: int | None = None) -> None:
        super().__init__(
            f"entry of {size} bytes exceeds the limit of {limit} bytes", ledger_id=ledger_id
        )
        self.size = size
        self.limit = limit


class NotEnoughBookiesError(LedgerError):
    """Fewer bookies are available than the ensemble needs."""

    retriable = True


class BookieUnavailableError(LedgerError):
    """A bookie did not answer (connection refused or cut, deadline passed)."""

    retriable = True


class StorageError(LedgerError):
    """A bookie's storage failed a write or is shut down; its adds all fail from then on."""

    retriable = True


class LedgerRecoveryError(LedgerError):
    """Recovery could not reach enough bookies to decide the ledger's end."""

    retriable = True


class DataLossError(LedgerError):
    """An entry that must exist was found on no bookie of its write set."""


class MetadataError(LedgerError):
    """Base of the metadata store's errors."""


class NoNodeError(MetadataError):
    """The metadata path does not exist."""


class NodeExistsError(MetadataError):
    """The metadata path already exists."""


class BadVersionError(MetadataError):
    """A compare-and-set lost: the node's version is not the expected one."""

    def __init__(self, path: str, expected: int, actual: int | None) -> None:
        super().__init__(f"{path}: expected version {expected}, found {actual}")
        self.path = path
        self.expected = expected
        self.actual = actual


class NotEmptyError(MetadataError):
    """A node with children cannot be deleted."""


class MetadataUnavailableError(MetadataError):
    """The metadata service (ZooKeeper) cannot be reached now: connection lost, no answer in time.

    A change that raised this may or may not have been applied (the request may
    have reached ZooKeeper before the connection was lost): read before retrying.
    """

    retriable = True


class MetadataSessionExpiredError(MetadataUnavailableError):
    """The ZooKeeper session expired: its ephemeral nodes and watches are gone.

    The store reconnects with a new session by itself; whoever owned ephemeral
    nodes (registrations, ownership) must create them again.
    """
