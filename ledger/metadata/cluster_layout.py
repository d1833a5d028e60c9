"""The ledger's part of a cluster's layout: the ``/cluster`` record, bookie registrations.

In cluster mode every process shares one metadata store (``--metadata-url``,
``ledger.metadata.stores``). ``ledger.metadata.paths`` names every path the
ledger layer uses in it (``broker.metadata_paths`` the broker's). Here: the
``/cluster`` record's ledger fields (``LedgerLayout``: new ledgers' default
quorums, which a bookie and auto-recovery check for at start), the parents
the ledger needs (``LEDGER_PARENT_PATHS``) and the ``Registration`` record a
bookie (and a broker) keeps while it lives.

The ``/cluster`` record is one JSON object shared by the layers, written once
by ``folio cluster init`` (``broker.cluster.layout.ClusterLayout``, which adds
the broker's ``container_count``); each layer reads its own fields.

A bookie's and a broker's ``<id>`` is its advertised ``host:port`` (a bookie's
is also its id in ledger metadata, so it must stay the same across restarts).
Bookies refuse to start on a store without ``/cluster``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TypeVar

from ledger.api import MetadataStore
from ledger.config import check_quorums
from ledger.errors import MetadataError, NoNodeError
from ledger.metadata.ledger_metadata import LEDGERS_PATH
from ledger.metadata.paths import BOOKIES_ALL_PATH, BOOKIES_AVAILABLE_PATH, CLUSTER_PATH
from ledger.records import RecordFormatError, dump_record, load_record

_Layout = TypeVar("_Layout")

__all__ = [
    "BOOKIES_ALL_PATH",
    "BOOKIES_AVAILABLE_PATH",
    "CLUSTER_PATH",
    "LAYOUT_FORMAT_VERSION",
    "LEDGERS_PATH",
    "LEDGER_PARENT_PATHS",
    "ClusterNotInitialisedError",
    "LedgerLayout",
    "Registration",
    "bookie_all_path",
    "bookie_available_path",
    "check_registration_id",
    "decode_layout_fields",
    "decode_layout_record",
    "read_layout_data",
    "read_ledger_layout",
]

#: The parents the ledger layer needs, created by ``folio cluster init``.
LEDGER_PARENT_PATHS = (LEDGERS_PATH, BOOKIES_AVAILABLE_PATH, BOOKIES_ALL_PATH)
#: The ``/cluster`` record's format.
LAYOUT_FORMAT_VERSION = 1


class ClusterNotInitialisedError(MetadataError):
    """The chroot has no ``/cluster`` record: ``folio cluster init`` was never run there."""


def bookie_available_path(bookie_id: str) -> str:
    """``/bookies/available/<id>``."""
    return f"{BOOKIES_AVAILABLE_PATH}/{check_registration_id(bookie_id)}"


def bookie_all_path(bookie_id: str) -> str:
    """``/bookies/all/<id>``."""
    return f"{BOOKIES_ALL_PATH}/{check_registration_id(bookie_id)}"


def check_registration_id(node_id: str) -> str:
    """``node_id`` if it can name a registration node, else ``ValueError``."""
    if not node_id or "/" in node_id or node_id in (".", ".."):
        raise ValueError(f"bad registration id {node_id!r}: non-empty, no '/'")
    return node_id


def decode_layout_record(path: str, data: bytes) -> dict[str, object]:
    """The fields of a ``/cluster`` or registration record; ``MetadataError`` on a bad one."""
    try:
        return load_record(data, path, (LAYOUT_FORMAT_VERSION,))
    except RecordFormatError as error:
        raise MetadataError(str(error)) from None


def decode_layout_fields(cls: type[_Layout], data: bytes) -> _Layout:
    """``cls`` (a dataclass of int fields) from the ``/cluster`` record's fields of its names.

    Raises ``MetadataError`` on a bad or unknown record, or a field missing or not an int.
    """
    record = decode_layout_record(CLUSTER_PATH, data)
    try:
        return cls(**{field.name: int(record[field.name])  # type: ignore[call-overload]
                      for field in fields(cls)})  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError) as error:
        raise MetadataError(f"{CLUSTER_PATH}: bad layout record: {error}") from None


@dataclass(frozen=True)
class LedgerLayout:
    """The ledger layer's fields of the ``/cluster`` record: new ledgers' default quorums.

    The record holds other layers' fields too (the broker's ``container_count``,
    written by ``folio cluster init``); the ledger reads only its own.

    Attributes:
        ensemble_size: default E of new ledgers.
        write_quorum: default Qw.
        ack_quorum: default Qa.
    """

    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2

    def __post_init__(self) -> None:
        check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)

    @classmethod
    def decode(cls, data: bytes) -> LedgerLayout:
        """The ledger's fields of a ``/cluster`` record. ``MetadataError`` on a bad one."""
        return decode_layout_fields(cls, data)


@dataclass(frozen=True)
class Registration:
    """A live bookie's or broker's record (``/bookies/...``, ``/brokers/<id>``).

    Attributes:
        address: ``host:port`` others reach it on.
        started_at_ms: wall-clock time the process registered (for operators).
        version: the Folio version it runs.
    """

    address: str
    started_at_ms: int
    version: str = ""

    def encode(self) -> bytes:
        """The node's data."""
        return dump_record(LAYOUT_FORMAT_VERSION, asdict(self))

    @classmethod
    def decode(cls, path: str, data: bytes) -> Registration:
        """Read a registration. Raises ``MetadataError`` on a bad one."""
        record = decode_layout_record(path, data)
        address, started = record.get("address"), record.get("started_at_ms")
        if not isinstance(address, str) or not isinstance(started, int):
            raise MetadataError(f"{path}: bad registration record")
        version = record.get("version", "")
        return cls(address=address, started_at_ms=started,
                   version=version if isinstance(version, str) else "")


async def read_layout_data(store: MetadataStore) -> bytes:
    """The ``/cluster`` record's bytes.

    Raises:
        ClusterNotInitialisedError: no ``/cluster`` record (run ``folio cluster init``).
        MetadataError: the store failed.
    """
    try:
        found = await store.get(CLUSTER_PATH)
    except NoNodeError:
        raise ClusterNotInitialisedError(
            f"no cluster here ({CLUSTER_PATH} is missing): run `folio cluster init "
            "--metadata-url URL` first") from None
    return found.data


async def read_ledger_layout(store: MetadataStore) -> LedgerLayout:
    """The ledger's part of the cluster's layout (bookies and auto-recovery check it at start).

    Raises:
        ClusterNotInitialisedError: no ``/cluster`` record (run ``folio cluster init``).
        MetadataError: a bad record, or the store failed.
    """
    return LedgerLayout.decode(await read_layout_data(store))
