"""The embedded metadata store's RocksDB layout: key spaces, node records, prefix scans.

On-disk layout. Keys and values are raw bytes (``Options(raw_mode=True)``,
nothing is pickled), in three key spaces:

- ``b"n" + path``: a node. The value is a 10-byte header -- format version
  (1 byte, currently 1), node version (8 bytes, big-endian), flags (1 byte,
  bit 0 = ephemeral) -- followed by the node's data. Children are found by a
  prefix scan of ``b"n" + path + b"/"``.
- ``b"s" + path``: the next sequence number for sequential children of
  ``path`` (8 bytes, big-endian). It lives apart from the node so deleting
  children never lowers it; it is removed with the node itself, as ZooKeeper
  restarts the counter of a re-created parent.
- ``b"e" + path``: an index of the ephemeral nodes (empty value), so that
  opening the store finds a crashed predecessor's ephemerals without scanning
  every node.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from ledger.errors import MetadataError

__all__ = [
    "EPHEMERAL_PREFIX", "MAX_SEQUENCE", "SEQUENCE", "SEQUENCE_DIGITS", "Node", "child_names",
    "decode_node", "encode_node", "ephemeral_key", "has_children", "keys_with_prefix", "node_key",
    "sequence_key",
]

NODE_PREFIX = b"n"
SEQUENCE_PREFIX = b"s"
EPHEMERAL_PREFIX = b"e"

NODE_FORMAT_VERSION = 1
# format version, node version, flags
NODE_HEADER = struct.Struct(">BQB")
FLAG_EPHEMERAL = 0x01
SEQUENCE = struct.Struct(">Q")
SEQUENCE_DIGITS = 10
MAX_SEQUENCE = 10**SEQUENCE_DIGITS - 1


def node_key(path: str) -> bytes:
    return NODE_PREFIX + path.encode("utf-8")


def sequence_key(path: str) -> bytes:
    return SEQUENCE_PREFIX + path.encode("utf-8")


def ephemeral_key(path: str) -> bytes:
    return EPHEMERAL_PREFIX + path.encode("utf-8")


def children_prefix(path: str) -> bytes:
    return node_key(path if path != "/" else "") + b"/"


class Node(NamedTuple):
    version: int
    ephemeral: bool
    data: bytes


def encode_node(version: int, ephemeral: bool, data: bytes) -> bytes:
    flags = FLAG_EPHEMERAL if ephemeral else 0
    return NODE_HEADER.pack(NODE_FORMAT_VERSION, version, flags) + data


def decode_node(path: str, value: bytes) -> Node:
    if len(value) < NODE_HEADER.size:
        raise MetadataError(f"{path}: node record of {len(value)} bytes is truncated")
    format_version, version, flags = NODE_HEADER.unpack_from(value)
    if format_version != NODE_FORMAT_VERSION:
        raise MetadataError(
            f"{path}: node record has unknown format version {format_version} "
            f"(this reader knows {NODE_FORMAT_VERSION})"
        )
    return Node(version, bool(flags & FLAG_EPHEMERAL), bytes(value[NODE_HEADER.size :]))



def keys_with_prefix(db: Any, prefix: bytes) -> list[bytes]:
    keys: list[bytes] = []
    iterator = db.iter()
    try:
        iterator.seek(prefix)
        while iterator.valid():
            key: bytes = iterator.key()
            if not key.startswith(prefix):
                break
            keys.append(key)
            iterator.next()
    finally:
        # A live iterator keeps RocksDB (and its LOCK) open after close().
        del iterator
    return keys


def child_names(db: Any, path: str) -> list[str]:
    """Names of the children of ``path``, in key (= code point) order.

    Keys under the prefix are children and deeper descendants interleaved
    (``/a/b``, ``/a/b/x``, ``/a/bc``); on meeting a descendant, the scan seeks
    past its child's whole subtree: ``"0"`` is the byte right after ``"/"``.
    """
    prefix = children_prefix(path)
    names: list[str] = []
    iterator = db.iter()
    try:
        iterator.seek(prefix)
        while iterator.valid():
            key: bytes = iterator.key()
            if not key.startswith(prefix):
                break
            rest = key[len(prefix) :]
            slash = rest.find(b"/")
            if not rest:  # the root's own key b"n/" sorts under its children prefix
                iterator.next()
            elif slash < 0:
                names.append(rest.decode("utf-8"))
                iterator.next()
            else:
                iterator.seek(prefix + rest[:slash] + b"0")
    finally:
        del iterator
    return names


def has_children(db: Any, path: str) -> bool:
    prefix = children_prefix(path)
    iterator = db.iter()
    try:
        iterator.seek(prefix)
        while iterator.valid():
            key: bytes = iterator.key()
            if not key.startswith(prefix):
                return False
            if len(key) > len(prefix):
                return True
            iterator.next()
        return False
    finally:
        del iterator
