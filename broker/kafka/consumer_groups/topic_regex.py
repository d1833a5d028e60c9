"""Regular-expression subscriptions of the consumer protocol (KIP-848's ``SubscribedTopicRegex``).

Kafka 4 resolves a member's regex on the broker with RE2/J (1.8) against the
topic names, a topic matching when its whole name matches (``matches()``).
Folio reads the regex as RE2/J does and translates it to an equivalent
Python pattern (``re2_syntax``: ``\\pL``, ``\\p{Greek}``, ``\\Q...\\E``, ``\\z``,
``(?U)``, POSIX classes, flag groups anywhere). The names are matched as RE2
matches, in time linear in a name's length (``re2_automaton``), not by
Python's backtracking ``re``, which a member's regex such as ``(a|a)*b``
would keep on the broker's event loop for minutes; only a regex whose
automaton would be too large (``(a{1000}){1000}``) is matched by the Python
pattern. What RE2/J refuses (backreferences, lookaround, possessive and
nested repetitions, ``\\C``, ``\\Z``, unknown classes, counts above 1000, ...)
``check_regex`` refuses with RE2/J's description, which Kafka answers as
INVALID_REGULAR_EXPRESSION. Folio's system topics
(``broker.segments.names.is_system_topic``) never match: the caller passes
the user topics only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from broker.kafka.consumer_groups.re2_automaton import Automaton, AutomatonTooLargeError
from broker.kafka.consumer_groups.re2_syntax import RE2SyntaxError, parse

__all__ = ["check_regex", "matching"]

log = logging.getLogger(__name__)

#: Names whose answer a regex's matcher keeps at most (then it starts again), and
#: matchers kept (``_compiled``): at most 64 x 20,000 answers, some tens of MB.
_MAX_KEPT_ANSWERS = 20_000


def check_regex(regex: str) -> str | None:
    """Why ``regex`` cannot be used (Kafka's message), or None if it can (module docstring)."""
    try:
        _compiled(regex)
    except RE2SyntaxError as error:
        return _invalid(regex, str(error))
    except (re.error, RecursionError) as error:  # Folio's bug, told precisely
        log.error("kafka regex %r: its translation does not compile (%s)", regex, error)
        return _invalid(regex, f"not supported by Folio here ({error})")
    return None


def matching(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The ``topics`` whose whole name matches ``regex`` (checked by ``check_regex``)."""
    matcher = _compiled(regex)
    return frozenset(t for t in topics if matcher.fullmatch(t))


class _Matcher:
    """Whether a whole name matches one regex, each name's answer kept: a group
    re-resolves its regex every refresh, against mostly the same names."""

    def __init__(self, match: Callable[[str], object]) -> None:
        self._match = match
        self._answers: dict[str, bool] = {}

    def fullmatch(self, name: str) -> bool:
        answer = self._answers.get(name)
        if answer is None:
            if len(self._answers) >= _MAX_KEPT_ANSWERS:
                self._answers.clear()
            answer = self._answers[name] = bool(self._match(name))
        return answer


@lru_cache(maxsize=64)
def _compiled(regex: str) -> _Matcher:
    """The matcher of ``regex`` (kept: a group re-resolves it every refresh).

    Its Python translation is compiled even where the automaton matches: a
    translation Python refuses is Folio's bug, and is told, not hidden."""
    text, node = parse(regex)
    pattern = re.compile(text)
    try:
        return _Matcher(Automaton(node).fullmatch)
    except AutomatonTooLargeError:
        log.info("kafka regex %r: matched by Python's re (its automaton is too large)", regex)
        return _Matcher(pattern.fullmatch)


def _invalid(regex: str, why: str) -> str:
    return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}."
