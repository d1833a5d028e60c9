"""Regular-expression subscriptions of the consumer protocol (KIP-848's ``SubscribedTopicRegex``).

Kafka 4 resolves a member's regex on the broker with RE2/J (1.8) against the
topic names, a topic matching when its whole name matches (``matches()``).
Folio reads the regex as RE2/J does and translates it to an equivalent
Python pattern (``re2_syntax``: ``\\pL``, ``\\p{Greek}``, ``\\Q...\\E``, ``\\z``,
``(?U)``, POSIX classes, flag groups anywhere), then ``fullmatch``es the names
with it. What RE2/J refuses (backreferences, lookaround, possessive and
nested repetitions, ``\\C``, ``\\Z``, unknown classes, counts above 1000, ...)
``check_regex`` refuses with RE2/J's description, which Kafka answers as
INVALID_REGULAR_EXPRESSION. Folio's system topics
(``broker.segments.names.is_system_topic``) never match: the caller passes
the user topics only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from functools import lru_cache

from broker.kafka.consumer_groups.re2_syntax import RE2SyntaxError, translate

__all__ = ["check_regex", "matching"]

log = logging.getLogger(__name__)


def check_regex(regex: str) -> str | None:
    """Why ``regex`` cannot be used (Kafka's message), or None if it can (module docstring)."""
    try:
        _compiled(regex)
    except RE2SyntaxError as error:
        return _invalid(regex, str(error))
    except re.error as error:  # a translation Python refuses: Folio's bug, told precisely
        log.error("kafka regex %r: its translation does not compile (%s)", regex, error)
        return _invalid(regex, f"not supported by Folio here ({error})")
    return None


def matching(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The ``topics`` whose whole name matches ``regex`` (checked by ``check_regex``)."""
    pattern = _compiled(regex)
    return frozenset(t for t in topics if pattern.fullmatch(t))


@lru_cache(maxsize=256)
def _compiled(regex: str) -> re.Pattern[str]:
    """``regex``'s Python translation, compiled (kept: a group re-resolves it every refresh)."""
    return re.compile(translate(regex))


def _invalid(regex: str, why: str) -> str:
    return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}."
