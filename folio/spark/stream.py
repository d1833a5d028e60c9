"""``FolioStreamReader``: a topic as a Spark structured-streaming source.

Runs on the driver (offsets, partitions) and on workers (``read``). Each call
on the driver opens a short-lived ``Client``: ``stop`` is not reliably
called, so nothing is left open between calls. Offsets and segment order are
``_plan``'s. ``availableNow`` is supported (``prepareForTriggerAvailableNow``
fixes the target offsets), and ``maxEventsPerTrigger`` is the default read limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from folio.client import Client
from folio.models import SegmentRange
from folio.spark._options import ReadOptions
from folio.spark._plan import initial_offsets, next_offsets, stream_slices
from folio.spark._read import open_channel, read_slice
from folio.spark.batch import SlicePartition

__all__ = ["FolioStreamReader"]


class FolioStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of a topic's new events; offsets ``{segment: offset}``."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict[str, int] | None = None

    def _segments(self) -> list[SegmentRange]:
        with Client(config=self.options.client) as client:
            return client.get_segments(self.options.topic, include_sealed=True)

    def initialOffset(self) -> dict[str, int]:
        return initial_offsets(self._segments(), self.options.starting)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_events_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fixes the end of an ``availableNow`` run: every segment's end offset now."""
        self._target = {s.name: s.end_offset for s in self._segments()}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        max_events = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return next_offsets(self._segments(), start, max_events, self._target)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [SlicePartition(piece) for piece in
                stream_slices(start, end, self.options.max_events_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicePartition)
        channel = open_channel(self.options.client)
        try:
            yield from read_slice(channel, self.options.topic, partition.piece,
                                  self.options.isolation, self.options.value_format,
                                  self.options.on_deserialization_error)
        finally:
            channel.close()

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: the query's checkpoint holds the offsets."""
