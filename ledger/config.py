"""Configuration of the ledger service: frozen dataclasses checked on construction.

Layering (defaults < file < environment < flags) is done by ``ledger.settings``;
these classes only hold and validate values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum

from ledger.security.tls import ServerTls

DEFAULT_MAX_ENTRY_BYTES = 5 * 1024 * 1024


class Durability(StrEnum):
    """When a bookie acknowledges an add.

    ``sync``: after the group commit holding it is synced (the default): the
    journal's ``fdatasync``, or with ``journal = none`` RocksDB's synced WAL.
    ``async``: after it is written (to the journal file, or RocksDB's
    write-ahead log), not yet synced; a machine crash may lose acknowledged
    entries. For tests and benchmarks that say so.
    """

    SYNC = "sync"
    ASYNC = "async"


class Journal(StrEnum):
    """Where a bookie makes an add durable before acknowledging it.

    ``on``: in its journal (``ledger.bookie.journal``; the default): one
    sequential append and ``fdatasync`` per group commit, RocksDB written in
    the background without its WAL. ``none``: in RocksDB's own synced WAL
    (kept for comparison, see docs/ledger.md).
    """

    ON = "on"
    NONE = "none"


@dataclass(frozen=True)
class BookieConfig:
    """One bookie: where it keeps data and how it acknowledges.

    Attributes:
        data_dir: directory of the bookie's RocksDB.
        durability: see ``Durability``.
        max_entry_bytes: adds of larger entries are refused.
        max_batch_bytes: a group commit is cut at about this many bytes (8 MiB:
            about 20 ms of a 400 MB/s disk, so a deep queue under load cannot make
            one commit, and every add in it, wait longer). An entry larger than
            this is a group commit of its own.
        read_max_bytes: default byte budget of one ReadEntries reply.
        journal: see ``Journal``.
        journal_dir: directory of the journal files (give it its own disk if
            there is one); empty: ``<data_dir>/journal``.
        journal_file_bytes: each journal file grows to this size (preallocated
            in 4 MiB steps); the journal rotates to a new file when it is full, and a
            checkpoint then lets the old ones go.
    """

    data_dir: str
    durability: Durability = Durability.SYNC
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES
    max_batch_bytes: int = 8 * 1024 * 1024
    read_max_bytes: int = 4 * 1024 * 1024
    journal: Journal = Journal.ON
    journal_dir: str = ""
    journal_file_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        if not self.data_dir:
            raise ValueError("BookieConfig.data_dir must be set")
        if self.max_entry_bytes <= 0:
            raise ValueError(f"max_entry_bytes must be positive, got {self.max_entry_bytes}")
        # A group commit always takes its first operation whatever its size (an
        # entry larger than max_batch_bytes is a commit of its own), so the two
        # limits are independent.
        if self.max_batch_bytes <= 0:
            raise ValueError(f"max_batch_bytes must be positive, got {self.max_batch_bytes}")
        if self.read_max_bytes <= 0:
            raise ValueError(f"read_max_bytes must be positive, got {self.read_max_bytes}")
        if self.journal_file_bytes < 4096:
            raise ValueError(
                f"journal_file_bytes must be at least 4096, got {self.journal_file_bytes}")

    @property
    def journal_directory(self) -> str:
        """Where the journal files are: ``journal_dir``, or ``<data_dir>/journal``."""
        return self.journal_dir or os.path.join(self.data_dir, "journal")


@dataclass(frozen=True)
class BookieListenConfig:
    """Where ``folio bookie`` serves: its gRPC API and its Prometheus metrics.

    Attributes:
        host: address both listen on.
        port: port of the Bookie gRPC service, 0 for any free one (BookKeeper's 3181).
        metrics_port: port of ``/metrics``, 0 for any free one (BookKeeper's 8000).
        tls_cert: PEM certificate of the gRPC port; with ``tls_key`` it serves TLS.
        tls_key: its PEM private key.
        tls_ca: PEM CA; when set, clients (the brokers) must present a
            certificate it signed (mutual TLS).
        metrics_tls: serve ``/metrics`` over HTTPS with the same files.
        auth_token_secret_file: HS256 secret; when set (or the next), every
            call needs a token whose role is one of ``super_users``.
        auth_token_public_key_file: RSA or EC public key (RS256, ES256).
        super_users: roles allowed to call the bookie (the brokers'),
            comma-separated; required with a token key.
    """

    host: str = "127.0.0.1"
    port: int = 3181
    metrics_port: int = 8000
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    metrics_tls: bool = False
    auth_token_secret_file: str = ""
    auth_token_public_key_file: str = ""
    super_users: str = ""

    def __post_init__(self) -> None:
        check_port("port", self.port)
        check_port("metrics_port", self.metrics_port)
        self.server_tls()  # checks the TLS settings go together
        if self.metrics_tls and not self.tls_cert:
            raise ValueError("metrics_tls needs tls_cert and tls_key")
        if self.auth_token_secret_file and self.auth_token_public_key_file:
            raise ValueError("give one of auth_token_secret_file and "
                             "auth_token_public_key_file, not both")
        if self.token_auth and not self.allowed_roles():
            raise ValueError("token authentication on a bookie needs super_users: the "
                             "roles of the brokers allowed to call it")

    def server_tls(self) -> ServerTls:
        """The gRPC port's TLS files (``ValueError`` if they do not go together)."""
        return ServerTls(self.tls_cert, self.tls_key, self.tls_ca)

    @property
    def token_auth(self) -> bool:
        """Whether calls must carry a token."""
        return bool(self.auth_token_secret_file or self.auth_token_public_key_file)

    def allowed_roles(self) -> frozenset[str]:
        """The roles of ``super_users``."""
        return split_roles(self.super_users)


def split_roles(text: str) -> frozenset[str]:
    """The roles of a comma-separated list, blanks dropped."""
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def check_port(name: str, port: int) -> None:
    """Raise ``ValueError`` unless ``port`` is in [0, 65535] (0: any free one)."""
    if not 0 <= port <= 65535:
        raise ValueError(f"{name} must be in [0, 65535], got {port}")


@dataclass(frozen=True)
class LedgerConfig:
    """The ledger client: quorums of new ledgers, limits and timeouts.

    Attributes:
        ensemble_size: E, bookies per ledger.
        write_quorum: Qw, bookies each entry is written to.
        ack_quorum: Qa, acknowledgements before an add is confirmed.
        max_entry_bytes: adds of larger entries raise ``EntryTooLargeError``.
        add_timeout_ms: a bookie that has not acknowledged an add by then is
            treated as failed and replaced.
        read_timeout_ms: deadline of one read from one bookie.
        max_add_request_bytes: an add request to one bookie is cut at about this size.
    """

    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES
    add_timeout_ms: int = 10_000
    read_timeout_ms: int = 10_000
    max_add_request_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)
        if self.max_entry_bytes <= 0:
            raise ValueError(f"max_entry_bytes must be positive, got {self.max_entry_bytes}")
        if self.add_timeout_ms <= 0 or self.read_timeout_ms <= 0:
            raise ValueError("timeouts must be positive")
        if self.max_add_request_bytes < self.max_entry_bytes:
            raise ValueError("max_add_request_bytes must be at least max_entry_bytes")


def check_quorums(ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
    """Raise ``ValueError`` unless E >= Qw >= Qa >= 1."""
    if not ensemble_size >= write_quorum >= ack_quorum >= 1:
        raise ValueError(
            "quorums must satisfy ensemble_size >= write_quorum >= ack_quorum >= 1, got "
            f"E={ensemble_size} Qw={write_quorum} Qa={ack_quorum}"
        )
