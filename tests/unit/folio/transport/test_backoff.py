"""``Backoff``: steps double to their cap, each delay jittered within [step / 2, step]."""

from __future__ import annotations

import pytest

from folio._transport.append_stream import BACKOFF_MIN_S, Backoff
from folio._transport.moving import MOVE_BACKOFF_MAX_S


def test_delays_double_to_the_cap_jittered_within_each_step() -> None:
    backoff = Backoff(MOVE_BACKOFF_MAX_S)
    steps = [BACKOFF_MIN_S * 2 ** n for n in range(4)] + [MOVE_BACKOFF_MAX_S] * 3
    assert steps[:5] == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.5])
    for step in steps:
        delay = backoff.next_delay()
        assert step / 2 <= delay <= step
    backoff.reset()
    assert BACKOFF_MIN_S / 2 <= backoff.next_delay() <= BACKOFF_MIN_S


def test_clients_retrying_together_spread_out() -> None:
    # Writers of one failed broker all start their lookups at once: with jitter
    # their retries do not stay in step.
    delays = {round(Backoff().next_delay(), 6) for _ in range(50)}
    assert len(delays) > 10
