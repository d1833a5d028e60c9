"""Readers: ``reader`` (``EventReader``: every segment of a topic from chosen
offsets), ``groups`` (``ReaderGroup``/``GroupReader``, with the ``_group_*``
modules: state rules, broker calls, start positions, heartbeats, admin),
``_event_read`` (what ``read_next`` returns), ``batch`` (``BatchClient``:
any segment range, any order) and ``cuts`` (``Position``, ``StreamCut``,
``Checkpoint``).

The public names are re-exported by ``folio``; import them from there.
"""

__all__: list[str] = []
