"""``RemoteBookies``: the ledger service ``folio broker`` writes to (``folio bookie`` processes)."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.bookie.remote import GrpcBookieClient
from ledger.client.directory import BookieDirectory
from ledger.config import check_quorums

__all__ = ["RemoteBookies"]


@dataclass(frozen=True)
class RemoteBookies:
    """Bookies reached over gRPC, and how a ledger is placed on them.

    Attributes:
        bookies: ``host:port`` of each bookie, comma-separated.
        ensemble_size: bookies a ledger is striped over (E).
        write_quorum: copies of each entry (Qw).
        ack_quorum: copies that must be durable before an add is confirmed (Qa).
    """

    bookies: str = ""
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1

    def __post_init__(self) -> None:
        addresses = self.addresses()
        if not addresses:
            raise ValueError("bookies must name at least one bookie (host:port, comma-separated)")
        for address in addresses:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise ValueError(f"bookie address {address!r} is not host:port")
        if len(set(addresses)) != len(addresses):
            raise ValueError(f"bookies names a bookie twice: {self.bookies}")
        check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)
        if self.ensemble_size > len(addresses):
            raise ValueError(f"ensemble_size {self.ensemble_size} needs as many bookies, "
                             f"got {len(addresses)}")

    def addresses(self) -> list[str]:
        """The bookie addresses, in the order given."""
        return [part.strip() for part in self.bookies.split(",") if part.strip()]

    def directory(self) -> BookieDirectory:
        """A directory of gRPC clients of the bookies (closed by ``LedgerClient.close``)."""
        return BookieDirectory([GrpcBookieClient(address) for address in self.addresses()],
                               connect=GrpcBookieClient)
