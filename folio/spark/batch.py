"""``FolioBatchReader``: a batch read of a topic between two cuts.

One input partition per segment slice (``_plan.batch_slices``), planned on the
driver with a short-lived ``Client``; each ``read`` (on a worker) opens its
own channel.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from folio.client import Client
from folio.spark._options import ReadOptions
from folio.spark._plan import Slice, batch_slices
from folio.spark._read import open_channel, read_slice

__all__ = ["FolioBatchReader", "SlicePartition"]


class SlicePartition(InputPartition):
    """One input partition: offsets ``[start, end)`` of one segment."""

    def __init__(self, piece: Slice) -> None:
        super().__init__(piece)
        self.piece = piece


class FolioBatchReader(DataSourceReader):
    """A batch read between ``startingPositions`` and ``endingPositions``."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._slices: list[Slice] | None = None

    def partitions(self) -> Sequence[InputPartition]:
        """Every segment the topic ever had (sealed ones too), in slices; planned on the driver."""
        options = self.options
        with Client(config=options.client) as client:
            segments = client.get_segments(options.topic, include_sealed=True)
        slices = batch_slices(segments, options.starting, options.ending,
                              options.max_events_per_partition)
        return [SlicePartition(piece) for piece in slices if piece.end > piece.start]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The slice's events, on a worker."""
        assert isinstance(partition, SlicePartition)
        channel = open_channel(self.options.client)
        try:
            yield from read_slice(channel, self.options.topic, partition.piece,
                                  self.options.isolation, self.options.value_format,
                                  self.options.on_deserialization_error)
        finally:
            channel.close()
