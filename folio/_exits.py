"""Leaving a ``with`` block whose body raised: the cleanup never replaces the body's error.

Every context manager of the SDK cleans up on the way out: a writer closes
(and flushes), a transaction left by an exception is aborted, a transaction
writer aborts what is open. When the body raised, that exception is the one
the application must see; a failure of the cleanup (a block that failed
earlier and is reported by ``close``, an abort the broker did not answer, the
client's IO thread already closed) is added to it as a note, as Java's
try-with-resources keeps a failed ``close()`` as a suppressed exception.
Raising it instead would hide the body's error behind a secondary one (shown
only as its ``__context__``, and not at all when the cleanup's error has a
``__cause__`` of its own set explicitly).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["clean_up"]


def clean_up(body_error: BaseException | None, cleanup: Callable[[], object],
             what: str) -> None:
    """Runs ``cleanup``; when the body raised, a failure of it becomes a note on the body's error.

    Args:
        body_error: the exception the ``with`` body raised (``__exit__``'s
            ``exc``), or None.
        cleanup: what leaving the block does (``close``, ``abort``).
        what: names the cleanup in the note, e.g. "closing the writer of topic 't'".

    Raises:
        Exception: whatever ``cleanup`` raises, only when the body did not
            raise (then there is no error to keep).
    """
    if body_error is None:
        cleanup()
        return
    try:
        cleanup()
    except Exception as error:
        body_error.add_note(f"{what} also reported {type(error).__name__}: {error}")
