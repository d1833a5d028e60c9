"""Events out of a Kafka record batch: blocks of format 2 (``events.proto``).

A block written through the Kafka listener is one Kafka record batch as the
producer sent it; this turns its records into the columns of an
``EventBlock`` (the mapping is in ``proto/folio/v1/events.proto``), so SDK
readers see Kafka-written events like any others. Decoding (CRC32C check,
gzip, snappy, lz4, zstd) is kafka-python's record module, imported on the
first such block: reading them needs the ``kafka`` extra
(``pip install 'folio[kafka]'``), and without it ``InvalidBlockError`` says so.
"""

from __future__ import annotations

from typing import Any

from folio.errors import InvalidBlockError

__all__ = ["KafkaColumns", "decode_kafka_batch"]

#: payloads, routing keys (empty: none), timestamps_ms, headers (empty: none).
KafkaColumns = tuple[list[bytes], list[str], list[int], list[dict[str, bytes]]]

_LOG_APPEND_TIME = 1


def decode_kafka_batch(batch: bytes) -> KafkaColumns:
    """The columns of the records of one Kafka record batch (magic 2).

    Raises ``InvalidBlockError`` for a batch that is cut, has a bad CRC, an
    unknown magic or codec, records that do not decode, or when kafka-python
    (the ``kafka`` extra) is not installed.
    """
    try:
        from kafka.record.default_records import DefaultRecordBatch  # noqa: PLC0415
    except ImportError as error:
        raise InvalidBlockError(
            "this block is a Kafka record batch (written through the Kafka listener); "
            f"reading it needs the kafka extra (pip install 'folio[kafka]'): {error}") from None
    if len(batch) < 61 or batch[16] != 2:
        raise InvalidBlockError(f"not a Kafka record batch of magic 2 ({len(batch)} bytes)")
    try:
        records: Any = DefaultRecordBatch(bytes(batch))
        if not records.validate_crc():
            raise InvalidBlockError("Kafka record batch fails its CRC32C check")
        append_time = (records.max_timestamp
                       if records.timestamp_type == _LOG_APPEND_TIME else None)
        payloads: list[bytes] = []
        keys: list[bytes | None] = []
        stamps: list[int] = []
        headers: list[dict[str, bytes]] = []
        for record in records:
            value = record.value
            payloads.append(b"" if value is None else bytes(value))
            keys.append(record.key)
            stamps.append(record.timestamp if append_time is None else append_time)
            headers.append({name: b"" if data is None else bytes(data)
                            for name, data in record.headers})
    except InvalidBlockError:
        raise
    except Exception as error:  # kafka-python raises CorruptRecordError, ValueError ...
        raise InvalidBlockError(f"Kafka record batch does not decode: {error}") from error
    routing_keys = ([] if all(key is None for key in keys) else
                    [(key or b"").decode("utf-8", "surrogateescape")
                     for key in keys])
    return payloads, routing_keys, stamps, headers if any(headers) else []
