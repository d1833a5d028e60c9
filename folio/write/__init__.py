"""Event writers: ``writer`` (``EventWriter``: routing, per-segment batching
into blocks, resends across reconnects and scaling), ``_segment_writer`` (one
segment's flow), ``_write_future`` (``WriteFuture``, one per event).

The public names are re-exported by ``folio``; import them from there.
"""

__all__: list[str] = []
