"""An event writer's routing table: key intervals and the segments that own them.

``KeyLayout`` maps key intervals to segment names, and is cut anew after a
seal (``replaced``); ``shared_layout`` hands out one per distinct topic and
segments, shared by that topic's writers. Moved from ``folio.write.writer``.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from folio.models import SegmentRange

__all__ = ["KeyLayout", "shared_layout"]


class KeyLayout:
    """Key intervals by ``key_low``: each one's segment name and upper bound (shared).

    At first one interval per open segment; after a seal, the sealed segment's
    intervals are cut into the parts its successors own (so a successor may
    own several intervals). ``segments``: each name once, in order.
    """

    __slots__ = ("__weakref__", "key_highs", "names", "segments")

    def __init__(self, names: tuple[str, ...], key_highs: tuple[float, ...]) -> None:
        self.names = names
        self.key_highs = key_highs
        self.segments = tuple(dict.fromkeys(names))

    def replaced(self, sealed: str, successors: list[SegmentRange]) -> KeyLayout:
        """This layout with ``sealed``'s intervals handed to the successors owning them."""
        names: list[str] = []
        highs: list[float] = []
        low = 0.0
        for name, high in zip(self.names, self.key_highs, strict=True):
            if name != sealed:
                names.append(name)
                highs.append(high)
            else:
                for successor in successors:
                    part_high = min(high, successor.key_high)
                    if max(low, successor.key_low) < part_high:
                        names.append(successor.name)
                        highs.append(part_high)
                if not highs or highs[-1] < high:
                    # Successors that do not cover it (never from the broker): keep the
                    # rest on the sealed one, whose appends then fail.
                    names.append(name)
                    highs.append(high)
            low = high
        return KeyLayout(tuple(names), tuple(highs))


#: One ``KeyLayout`` per distinct (topic, segments), shared by that topic's writers.
_LAYOUTS: weakref.WeakValueDictionary[tuple[str, tuple[str, ...], tuple[float, ...]],
                                      KeyLayout] = weakref.WeakValueDictionary()
_LAYOUTS_LOCK: Final = threading.Lock()


def shared_layout(topic: str, names: tuple[str, ...],
                  key_highs: tuple[float, ...]) -> KeyLayout:
    """The layout of (topic, segments), one shared by that topic's writers."""
    key = (topic, names, key_highs)
    with _LAYOUTS_LOCK:
        layout = _LAYOUTS.get(key)
        if layout is None:
            layout = _LAYOUTS[key] = KeyLayout(names, key_highs)
        return layout
