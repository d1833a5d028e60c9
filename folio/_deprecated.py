"""Old spellings of renamed parameters, kept for one release with a ``DeprecationWarning``.

The SDK's rule for durations (docs/sdk.md, "Timeouts and durations"): a call's
own wait is ``timeout``, a float in seconds (``None``: no limit), as in
``queue.Queue.get`` and ``concurrent.futures.Future.result``. A parameter that
was spelled otherwise keeps working for one release through
:func:`renamed_timeout`, which names the new spelling in its warning.
"""

from __future__ import annotations

import warnings

from folio.errors import InvalidArgumentError

__all__ = ["renamed_timeout"]


def renamed_timeout(where: str, timeout: float | None, old_name: str, old: float | None,
                    seconds_per_unit: float) -> float | None:
    """The wait in seconds: ``timeout``, or the deprecated ``old`` given in its own unit.

    Args:
        where: the call, for the messages (e.g. ``"GroupReader.read_next"``).
        timeout: the new spelling's value, in seconds (None: not given or no limit).
        old_name: the deprecated parameter's name (e.g. ``"timeout_ms"``).
        old: its value (None: not given).
        seconds_per_unit: ``0.001`` for milliseconds, ``1.0`` for seconds.

    Raises:
        InvalidArgumentError: both spellings given.
    """
    if old is None:
        return timeout
    # stacklevel 3: the warning points at the caller of the public method.
    warnings.warn(f"{where}({old_name}=...) is deprecated and will be removed in the next "
                  f"release: pass timeout= in seconds instead", DeprecationWarning,
                  stacklevel=3)
    if timeout is not None:
        raise InvalidArgumentError(f"{where}: give timeout (seconds) or {old_name}, not both")
    return old * seconds_per_unit
