"""The framing of every persisted JSON record: one version key, one writer, one reader.

A record (a metadata node's data, a compacted system topic's value) is a JSON
object carrying its format under ``format_version`` (``VERSION_KEY``) beside
its fields, written compact with sorted keys, UTF-8 (``dump_record``). A reader
names the formats it reads (``load_record``) and gets the fields, or a
``RecordFormatError`` (a ``ValueError``) saying why not: not JSON, not an
object, or a format it does not read. Each record's owner turns that into its
own error (``MetadataError``, ``CorruptDataError`` ...).

Earlier builds framed some records differently: the version under ``"v"``
(the transaction log, commit keys, the Kafka records), under ``"version"``
(permissions, ownership records) or not at all (heartbeats, the SCRAM table's
``"format"``). Their readers pass ``legacy_key`` (where the old version was) or
``unversioned`` (the format of a record with no version), so what an earlier
build wrote still loads; every writer now writes ``format_version``. Where an
earlier build's reader checked its own key, the writer passes ``legacy_key`` to
``dump_record`` too, which writes the version under both keys: a broker of the
earlier build still reads the record during a rolling upgrade (a transaction
log record it refused would be skipped, and its transaction forgotten). Once
no such build runs, the second key can go; readers here never look at it.

The records in binary formats keep their own codecs (protobuf or ``struct``,
each with a ``format_version`` field of its own): the ledger metadata record,
the metadata node header, the ledger id counter, the transaction buffer's
snapshots, the system topics' record header and the bookie's journal.

In the bottom layer of ``ledger`` so that every package can use it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, Final

__all__ = ["VERSION_KEY", "RecordFormatError", "dump_record", "load_record"]

#: The key every record's format number is stored under.
VERSION_KEY: Final = "format_version"


class RecordFormatError(ValueError):
    """A stored record this build cannot read: not JSON, not an object, or an unknown format.

    Attributes:
        what: the record's name, as the reader gave it ("segment record").
        version: the format version found (None: none, or not a JSON object).
    """

    def __init__(self, message: str, what: str, version: object = None) -> None:
        super().__init__(message)
        self.what = what
        self.version = version


def dump_record(version: int, fields: Mapping[str, Any], *,
                legacy_key: str | None = None) -> bytes:
    """A record as stored: ``fields`` and ``format_version``, compact JSON, keys sorted, UTF-8.

    Args:
        version: the record's format.
        fields: its fields.
        legacy_key: also write the version under this key, where the build
            before the shared framing looked for it (``"v"``, ``"version"``), so
            that a broker of that build still reads the record during a rolling
            upgrade (docs/cluster.md); readers of this build ignore it. None for
            records whose earlier readers never checked a version.

    Raises:
        ValueError: ``fields`` holds a version key of its own.
    """
    keys = {VERSION_KEY} if legacy_key is None else {VERSION_KEY, legacy_key}
    if keys & set(fields):
        raise ValueError(f"a record's fields may not hold {sorted(keys & set(fields))}")
    versions = dict.fromkeys(keys, version)
    return json.dumps({**versions, **fields},
                      separators=(",", ":"), sort_keys=True).encode("utf-8")


def load_record(data: bytes | str, what: str, versions: Collection[int], *,
                legacy_key: str | None = None,
                unversioned: int | None = None) -> dict[str, Any]:
    """A stored record's fields, its format under ``format_version`` whatever the framing.

    Args:
        data: the stored bytes.
        what: the record's name, for the error message.
        versions: the formats this reader reads.
        legacy_key: where an earlier build kept the format (``"v"``, ``"version"``),
            read when ``format_version`` is absent; the key is removed from the
            fields either way (``dump_record`` may write both).
        unversioned: the format of a record with no version at all (an earlier
            build that wrote none); None: such a record is refused.

    Raises:
        RecordFormatError: not a JSON object, or a format outside ``versions``.
    """
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        raise RecordFormatError(f"{what} is not a JSON record ({error})", what) from None
    if not isinstance(record, dict):
        raise RecordFormatError(
            f"{what} is not a JSON object but a {type(record).__name__}", what)
    legacy = record.pop(legacy_key, None) if legacy_key is not None else None
    if VERSION_KEY in record:
        version = record[VERSION_KEY]
    elif legacy is not None:
        version = legacy
    else:
        version = unversioned
    if isinstance(version, bool) or version not in versions:
        readable = " and ".join(map(str, versions))
        raise RecordFormatError(
            f"{what} has unknown format version {version!r} (this build reads {readable})",
            what, version)
    record[VERSION_KEY] = version
    return record
