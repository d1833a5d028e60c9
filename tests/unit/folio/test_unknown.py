"""``folio._unknown.settle``: unknown outcomes are tried again, known ones raised.

The calls it serves are tested against a real standalone in
``tests/integration/test_unknown_outcomes.py``; these pin its rules.
"""

from __future__ import annotations

import builtins

import pytest

from folio._unknown import settle
from folio.errors import (
    FolioUnavailableError,
    NoBrokerAvailableError,
    OutcomeUnknownError,
    TimeoutError,
    TopicNotFoundError,
    WrongEndpointError,
)


def test_an_unknown_outcome_is_tried_again_with_after_unknown_set() -> None:
    seen: list[bool] = []

    def attempt(after_unknown: bool) -> str:
        seen.append(after_unknown)
        if len(seen) == 1:
            raise builtins.TimeoutError("no answer within 35.0 s")
        if len(seen) == 2:
            raise TimeoutError("DEADLINE_EXCEEDED")
        return "done"

    assert settle("Op x", attempt, timeout_s=30) == "done"
    assert seen == [False, True, True]


def test_a_refusal_is_raised_at_once() -> None:
    seen: list[bool] = []

    def attempt(after_unknown: bool) -> None:
        seen.append(after_unknown)
        raise TopicNotFoundError("no topic x")

    with pytest.raises(TopicNotFoundError):
        settle("Op x", attempt, timeout_s=30)
    assert seen == [False]


@pytest.mark.parametrize("error", [
    NoBrokerAvailableError("no broker answered"),
    FolioUnavailableError("nothing is listening at 127.0.0.1:1", reason="refused"),
    WrongEndpointError("an HTTP server listens at 127.0.0.1:1"),
], ids=["no-broker", "refused", "wrong-endpoint"])
def test_a_call_that_never_left_is_raised_at_once(error: FolioUnavailableError) -> None:
    calls: list[bool] = []

    def attempt(after_unknown: bool) -> None:
        calls.append(after_unknown)
        raise error

    with pytest.raises(type(error)):
        settle("Op x", attempt, timeout_s=30)
    assert calls == [False]


def test_unsent_after_an_unknown_outcome_decides_nothing() -> None:
    errors: list[Exception] = [FolioUnavailableError("connection reset"),
                               NoBrokerAvailableError("no broker answered")]

    def attempt(after_unknown: bool) -> str:
        if errors:
            raise errors.pop(0)
        assert after_unknown
        return "done"

    assert settle("Op x", attempt, timeout_s=30) == "done"


def test_still_unknown_at_the_deadline_is_outcome_unknown() -> None:
    def attempt(after_unknown: bool) -> None:
        raise FolioUnavailableError("connection reset")

    with pytest.raises(OutcomeUnknownError) as raised:
        settle("DeleteTopic t", attempt, timeout_s=0.2)
    error = raised.value
    assert error.operation == "DeleteTopic t"
    assert "outcome is unknown" in str(error) and "connection reset" in str(error)
    assert isinstance(error.__cause__, FolioUnavailableError)
    assert isinstance(error, FolioUnavailableError) and isinstance(error, builtins.TimeoutError)


def test_outcome_unknown_from_an_attempt_is_not_tried_again() -> None:
    calls: list[bool] = []

    def attempt(after_unknown: bool) -> None:
        calls.append(after_unknown)
        raise OutcomeUnknownError("read back: changed by another", operation="Op x")

    with pytest.raises(OutcomeUnknownError):
        settle("Op x", attempt, timeout_s=30)
    assert calls == [False]
