"""Both faces of a transaction across segments show the same calls, arguments and states.

The asyncio face's ``AsyncTransactionalWriter``/``AsyncFullTransaction`` have
every public name of the blocking ``TransactionalWriter``/``Transaction``; the
calls that do IO are coroutines, ``write_event`` (buffering only) is not, and
the arguments are the same but for ``timeout`` (``asyncio.timeout`` bounds a
wait there).
"""

from __future__ import annotations

import inspect

import pytest

from folio import Client, Transaction, TransactionalWriter
from folio.aio import AsyncClient, AsyncFullTransaction, AsyncTransactionalWriter

_SYNC = {"write_event", "event_count", "resent_blocks", "closed"}


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def _arguments(function: object) -> list[str]:
    return [name for name in inspect.signature(function).parameters  # type: ignore[arg-type]
            if name not in ("self", "timeout")]


@pytest.mark.parametrize(("blocking", "awaiting"), [
    (Transaction, AsyncFullTransaction), (TransactionalWriter, AsyncTransactionalWriter)])
def test_the_async_face_has_every_call_of_the_blocking_one(blocking: type,
                                                            awaiting: type) -> None:
    names = _public(blocking)
    assert {"commit", "abort", "status"} <= names or {"begin", "close"} <= names
    assert names <= _public(awaiting)
    for name in names:
        shown = getattr(awaiting, name)
        if isinstance(shown, property):
            continue
        assert inspect.iscoroutinefunction(shown) == (name not in _SYNC), name
        assert _arguments(shown) == _arguments(getattr(blocking, name)), name


def test_the_clients_make_writers_with_the_same_arguments() -> None:
    assert _arguments(AsyncClient.transactional_writer) == \
        _arguments(Client.transactional_writer)
    assert inspect.iscoroutinefunction(AsyncClient.transactional_writer)
