"""``IoThread.run``: a coroutine's own TimeoutError is not taken for the wait's end."""

from __future__ import annotations

import builtins
from collections.abc import Iterator

import pytest

import folio
from folio._transport.io_thread import IoThread
from folio.errors import OutcomeUnknownError


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-io-run")
    yield thread
    thread.close()


def test_a_typed_timeout_raised_by_the_coroutine_passes_as_is(io: IoThread) -> None:
    async def unknown() -> None:
        raise OutcomeUnknownError("UpdateReaderGroup g: unknown", operation="UpdateReaderGroup g")

    with pytest.raises(OutcomeUnknownError) as raised:
        io.run(unknown())
    assert raised.value.operation == "UpdateReaderGroup g"


def test_an_asyncio_timeout_of_the_coroutine_becomes_a_folio_timeout(io: IoThread) -> None:
    async def limited() -> None:
        raise builtins.TimeoutError("a deadline inside")

    with pytest.raises(folio.TimeoutError, match="a deadline inside"):
        io.run(limited())
