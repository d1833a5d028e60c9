"""Event writers: ``writer`` (``EventWriter``: routing by key, one
``SegmentWriter`` per segment, following seals to the successors),
``_segment_writer`` (one segment's caller side: batching events into blocks,
backpressure, the hand-over after a seal; it holds its flow), ``_segment_flow``
(its IO side: the pipelined policy of the one flow engine, ``folio._flow``),
``_write_future`` (``WriteFuture``, one per event).

The public names are re-exported by ``folio``; import them from there.
"""

__all__: list[str] = []
