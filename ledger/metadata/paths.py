"""Metadata paths: the ZooKeeper-shaped names every MetadataStore accepts, and the ledger's.

The rules (``validate_path``) hold in every store. The names below are every
path the ledger layer uses, under the store's root (a cluster's ZooKeeper
chroot, or the embedded store's root); use them, never spell a path out
elsewhere (``tests/unit/test_metadata_paths.py`` fails on a path literal
outside this module and ``broker.metadata_paths``, which names the broker's):

=======================================  ================================  =============  ==========
path                                     holds                             written by     kind
=======================================  ================================  =============  ==========
``/cluster``                             the layout record (JSON, format   cluster init   persistent
                                         1): the ledger reads its default
                                         quorums
                                         (``cluster_layout.LedgerLayout``);
                                         the broker adds its own fields
``/ledgers/L<id>``                       a ledger's metadata               brokers        persistent
                                         (``ledger_metadata``)
``/ledgers/idgen``                       the last ledger id given out      brokers        persistent
                                         (``ledger.client.ledger_ids``)
``/bookies/available/<id>``              ``Registration`` of a live        the bookie     ephemeral
                                         bookie
``/bookies/all/<id>``                    ``Registration`` of every bookie  the bookie,    persistent
                                         that ever registered (in all,     at each start
                                         not available: the bookie is
                                         gone)
``/autorecovery/auditor``                the id of the worker that audits  auto-recovery  ephemeral
``/autorecovery/underreplicated/L<id>``  a ledger that lacks copies        auto-recovery  persistent
                                         (``ledger.autorecovery.marks``)
``/autorecovery/locks/L<id>``            the worker re-replicating it      auto-recovery  ephemeral
=======================================  ================================  =============  ==========
"""

from __future__ import annotations

from ledger.errors import InvalidArgumentError

__all__ = [
    "AUDITOR_PATH",
    "AUTORECOVERY_PATH",
    "BOOKIES_ALL_PATH",
    "BOOKIES_AVAILABLE_PATH",
    "CLUSTER_PATH",
    "IDGEN_PATH",
    "LEDGERS_PATH",
    "LOCKS_PATH",
    "UNDER_REPLICATED_PATH",
    "parent_path",
    "validate_path",
]

#: The cluster's layout record.
CLUSTER_PATH = "/cluster"
#: Live bookies: one ephemeral child per bookie, named by its id.
BOOKIES_AVAILABLE_PATH = "/bookies/available"
#: Every bookie that ever registered: one persistent child per bookie.
BOOKIES_ALL_PATH = "/bookies/all"
#: Parent of every ledger's metadata node.
LEDGERS_PATH = "/ledgers"
#: The counter node; a child of ``/ledgers``, next to the ``L…`` ledger nodes.
IDGEN_PATH = "/ledgers/idgen"
#: Auto-recovery's marks, locks and auditor live under it.
AUTORECOVERY_PATH = "/autorecovery"
AUDITOR_PATH = f"{AUTORECOVERY_PATH}/auditor"
UNDER_REPLICATED_PATH = f"{AUTORECOVERY_PATH}/underreplicated"
LOCKS_PATH = f"{AUTORECOVERY_PATH}/locks"


def validate_path(path: str) -> None:
    """Check that ``path`` is a well-formed metadata path.

    A path starts with ``/``, has no trailing slash (except the root ``/``),
    no empty, ``.`` or ``..`` components, no NUL character, and is valid UTF-8.

    Raises:
        InvalidArgumentError: naming what is wrong with the path.
    """
    if not isinstance(path, str):
        raise InvalidArgumentError(f"metadata path must be a str, got {type(path).__name__}")
    if not path.startswith("/"):
        raise InvalidArgumentError(f"metadata path {path!r} must start with '/'")
    if path == "/":
        return
    if path.endswith("/"):
        raise InvalidArgumentError(f"metadata path {path!r} must not end with '/'")
    if "\x00" in path:
        raise InvalidArgumentError(f"metadata path {path!r} must not contain NUL")
    for component in path[1:].split("/"):
        if not component:
            raise InvalidArgumentError(f"metadata path {path!r} has an empty component")
        if component in (".", ".."):
            raise InvalidArgumentError(
                f"metadata path {path!r} must not have a {component!r} component"
            )
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidArgumentError(f"metadata path {path!r} is not valid UTF-8") from error


def parent_path(path: str) -> str:
    """The parent of a valid, non-root path (``/a/b`` -> ``/a``, ``/a`` -> ``/``)."""
    return path.rsplit("/", 1)[0] or "/"
