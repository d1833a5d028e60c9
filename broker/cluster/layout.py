"""The broker's part of a cluster's layout: the whole ``/cluster`` record, init, ``/brokers``.

``folio cluster init`` (BookKeeper's ``initnewcluster``) writes ``/cluster``
once: ``ClusterLayout``, the broker's ``container_count`` (segment containers,
``broker.cluster.containers``) beside the ledger's default quorums
(``ledger.metadata.cluster_layout.LedgerLayout`` reads those). The record's
bytes are what they were when ``ledger.metadata.cluster_layout`` held all of
it, so a cluster initialised by an earlier build reads the same. Init also
creates the parents: the ledger's (``LEDGER_PARENT_PATHS``) and the broker's
(``/brokers``, ``/folio``). Every broker path's name is in
``broker.metadata_paths``; brokers refuse to start on a store without
``/cluster``.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, fields

from broker.metadata_paths import BROKERS_PATH, FOLIO_PATH
from ledger.api import MetadataStore
from ledger.config import check_quorums
from ledger.errors import NodeExistsError
from ledger.metadata.cluster_layout import (
    CLUSTER_PATH,
    LAYOUT_FORMAT_VERSION,
    LEDGER_PARENT_PATHS,
    check_registration_id,
    decode_layout_fields,
    read_layout_data,
)
from ledger.records import dump_record

__all__ = [
    "BROKERS_PATH",
    "DEFAULT_CONTAINER_COUNT",
    "FOLIO_PATH",
    "PARENT_PATHS",
    "ClusterLayout",
    "broker_path",
    "init_cluster",
    "read_layout",
]

#: Created by ``folio cluster init`` besides ``/cluster``.
PARENT_PATHS = (*LEDGER_PARENT_PATHS, BROKERS_PATH, FOLIO_PATH)
#: Segment containers of a cluster unless ``folio cluster init`` says otherwise.
DEFAULT_CONTAINER_COUNT = 16


def broker_path(broker_id: str) -> str:
    """``/brokers/<id>``."""
    return f"{BROKERS_PATH}/{check_registration_id(broker_id)}"


@dataclass(frozen=True)
class ClusterLayout:
    """What ``folio cluster init`` fixes for the cluster's life.

    Attributes:
        container_count: segment containers (a segment belongs to the one its
            name hashes to); cannot change once set.
        ensemble_size: default E of new ledgers.
        write_quorum: default Qw.
        ack_quorum: default Qa.
    """

    container_count: int = DEFAULT_CONTAINER_COUNT
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2

    def __post_init__(self) -> None:
        if not 1 <= self.container_count <= 65536:
            raise ValueError(f"container_count must be in [1, 65536], got {self.container_count}")
        check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)

    def encode(self) -> bytes:
        """The ``/cluster`` node's data."""
        return dump_record(LAYOUT_FORMAT_VERSION, asdict(self))

    @classmethod
    def decode(cls, data: bytes) -> ClusterLayout:
        """Read a ``/cluster`` record. Raises ``MetadataError`` on a bad or unknown one."""
        return decode_layout_fields(cls, data)

    def differences(self, other: ClusterLayout) -> list[str]:
        """``name: mine != theirs`` for each field that differs."""
        return [f"{field.name}: {getattr(self, field.name)} != {getattr(other, field.name)}"
                for field in fields(self)
                if getattr(self, field.name) != getattr(other, field.name)]


async def read_layout(store: MetadataStore) -> ClusterLayout:
    """The cluster's layout.

    Raises:
        ClusterNotInitialisedError: no ``/cluster`` record (run ``folio cluster init``).
        MetadataError: a bad record, or the store failed.
    """
    return ClusterLayout.decode(await read_layout_data(store))


async def init_cluster(store: MetadataStore, layout: ClusterLayout) -> tuple[bool, ClusterLayout]:
    """Write ``layout`` as the cluster's, once, and create the base paths.

    Idempotent: the base paths are created if missing whatever happens, and a
    second run finds the record there (or loses the race to a concurrent
    init: ``create`` is atomic, so exactly one writes it).

    Returns:
        ``(True, layout)`` if this call wrote the record, else ``(False,
        the existing layout)``, which may differ from ``layout``: the caller
        decides whether that is an error.
    """
    try:
        await store.create(CLUSTER_PATH, layout.encode())
        created = True
    except NodeExistsError:
        created = False
    for path in PARENT_PATHS:
        with contextlib.suppress(NodeExistsError):
            await store.create(path, make_parents=True)
    return created, (layout if created else await read_layout(store))
