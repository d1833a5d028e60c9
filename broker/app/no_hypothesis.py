"""Import kio (the Kafka wire library) without Hypothesis, so a broker writes no ``.hypothesis/``.

kio's ``static._phantom`` imports ``hypothesis.strategies`` when it is
installed (it is, with the dev extras) to register test strategies; importing
Hypothesis makes a ``.hypothesis/`` directory in the current directory, so
``folio standalone`` started anywhere left one behind. A server never needs
those strategies: while kio is first imported, ``hypothesis`` is hidden
(``sys.modules[name] = None`` makes ``import`` raise ``ImportError``, which kio
handles), then unhidden. A process that imported Hypothesis already (a test
run) is left as it is.
"""

from __future__ import annotations

import sys
from typing import Final

__all__ = ["HiddenModules", "hide_hypothesis"]

_NAMES: Final = ("hypothesis", "hypothesis.strategies")


class HiddenModules:
    """Modules hidden from ``import`` until :meth:`restore`."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        for name in names:
            sys.modules[name] = None  # type: ignore[assignment]

    def restore(self) -> None:
        """Makes them importable again (only the entries this hid). Idempotent."""
        for name in self._names:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
        self._names = ()


def hide_hypothesis() -> HiddenModules:
    """Hides Hypothesis from imports until ``restore``, unless it is imported already."""
    if "hypothesis" in sys.modules:
        return HiddenModules(())
    return HiddenModules(_NAMES)
