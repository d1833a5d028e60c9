"""Metadata paths: the ZooKeeper-shaped names every MetadataStore accepts."""

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
