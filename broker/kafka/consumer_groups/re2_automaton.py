"""Linear-time full matching of a parsed RE2 regex (as RE2 itself matches: no backtracking).

``re2_syntax`` parses a regex into ``Node``s beside its Python translation;
``Automaton`` compiles them to a Thompson NFA and runs it as a lazily built
DFA over a name: time linear in the name's length whatever the regex, as in
RE2/J. Python's backtracking ``re`` takes time exponential in the name's
length for a regex such as ``(a|a)*b``, and a member's regex is matched on the
broker's event loop. Only whether the whole name matches is computed (no
groups, no preference between matches: greediness does not change it).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from broker.kafka.consumer_groups.re2_classes import Ranges

__all__ = [
    "Alternate", "Assert", "Automaton", "AutomatonTooLargeError", "Chars", "Concat", "Node",
    "Repeat",
]

#: NFA states at most (RE2 bounds its programs by memory the same way): a regex such as
#: ``(a{1000}){1000}`` would need a million.
MAX_STATES = 100_000
#: Cached DFA steps at most; the cache starts again when full.
_MAX_CACHED = 20_000


@dataclass(frozen=True)
class Chars:
    """One character of ``ranges``."""

    ranges: Ranges


@dataclass(frozen=True)
class Assert:
    """An empty string where ``kind`` holds: begin_text, end_text, begin_line, end_line,
    word_boundary, not_word_boundary (ASCII words)."""

    kind: str


@dataclass(frozen=True)
class Concat:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alternate:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    """``item`` ``low`` to ``high`` times (None: unbounded)."""

    item: Node
    low: int
    high: int | None


Node = Chars | Assert | Concat | Alternate | Repeat


class AutomatonTooLargeError(ValueError):
    """The regex needs more than ``MAX_STATES`` NFA states."""


_CHAR, _SPLIT, _ASSERT, _MATCH = 0, 1, 2, 3


class Automaton:
    """The NFA of a ``Node`` and its lazily built DFA; ``fullmatch(name)``."""

    def __init__(self, node: Node) -> None:
        self._kinds: list[int] = []
        self._targets: list[list[int]] = []
        self._ranges: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        self._asserts: list[str] = []
        match = self._state(_MATCH, [])
        self._start = self._compile(node, match)
        self._closures: dict[tuple[frozenset[int], int], tuple[tuple[int, ...], bool]] = {}
        self._steps: dict[tuple[tuple[int, ...], str], frozenset[int]] = {}

    # -- building ---------------------------------------------------------------------

    def _state(self, kind: int, targets: list[int], ranges: Ranges = (),
               assertion: str = "") -> int:
        if len(self._kinds) >= MAX_STATES:
            raise AutomatonTooLargeError(f"more than {MAX_STATES} automaton states")
        self._kinds.append(kind)
        self._targets.append(targets)
        self._ranges.append((tuple(r[0] for r in ranges), tuple(r[1] for r in ranges)))
        self._asserts.append(assertion)
        return len(self._kinds) - 1

    def _compile(self, node: Node, next_state: int) -> int:
        """The state that matches ``node`` then goes on at ``next_state``."""
        if isinstance(node, Chars):
            return self._state(_CHAR, [next_state], node.ranges)
        if isinstance(node, Assert):
            return self._state(_ASSERT, [next_state], assertion=node.kind)
        if isinstance(node, Concat):
            state = next_state
            for item in reversed(node.items):
                state = self._compile(item, state)
            return state
        if isinstance(node, Alternate):
            return self._state(_SPLIT, [self._compile(i, next_state) for i in node.items])
        state = next_state
        if node.high is None:
            loop = self._state(_SPLIT, [])
            self._targets[loop] += [self._compile(node.item, loop), next_state]
            state = loop
        else:
            for _ in range(node.high - node.low):
                state = self._state(_SPLIT, [self._compile(node.item, state), next_state])
        for _ in range(node.low):
            state = self._compile(node.item, state)
        return state

    # -- matching ---------------------------------------------------------------------

    def fullmatch(self, name: str) -> bool:
        """Whether the whole of ``name`` matches."""
        pending = frozenset((self._start,))
        for position in range(len(name) + 1):
            chars, matched = self._closure(pending, _context(name, position))
            if position == len(name):
                return matched
            pending = self._step(chars, name[position])
            if not pending:
                return False
        return False  # not reached: the loop returns at the end of the name

    def _closure(self, pending: frozenset[int], context: int,
                 ) -> tuple[tuple[int, ...], bool]:
        """(the character states reachable from ``pending`` by empty moves whose assertions
        hold in ``context``, whether the match state is)."""
        key = (pending, context)
        cached = self._closures.get(key)
        if cached is not None:
            return cached
        seen: set[int] = set()
        chars: list[int] = []
        matched = False
        stack = list(pending)
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            kind = self._kinds[state]
            if kind == _CHAR:
                chars.append(state)
            elif kind == _MATCH:
                matched = True
            elif kind == _SPLIT or _holds(self._asserts[state], context):
                stack.extend(self._targets[state])
        answer = (tuple(sorted(chars)), matched)
        if len(self._closures) >= _MAX_CACHED:
            self._closures.clear()
        self._closures[key] = answer
        return answer

    def _step(self, chars: tuple[int, ...], char: str) -> frozenset[int]:
        key = (chars, char)
        cached = self._steps.get(key)
        if cached is not None:
            return cached
        code_point = ord(char)
        following: set[int] = set()
        for state in chars:
            lows, highs = self._ranges[state]
            index = bisect.bisect_right(lows, code_point) - 1
            if index >= 0 and code_point <= highs[index]:
                following.add(self._targets[state][0])
        answer = frozenset(following)
        if len(self._steps) >= _MAX_CACHED:
            self._steps.clear()
        self._steps[key] = answer
        return answer


# The context of a position: what is before and after it, as bits.
_AT_START, _AT_END, _AFTER_NEWLINE, _BEFORE_NEWLINE, _AFTER_WORD, _BEFORE_WORD = (
    1, 2, 4, 8, 16, 32)


def _is_word(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


def _context(name: str, position: int) -> int:
    context = 0
    if position == 0:
        context |= _AT_START
    else:
        before = name[position - 1]
        context |= (_AFTER_NEWLINE if before == "\n" else 0) | (
            _AFTER_WORD if _is_word(before) else 0)
    if position == len(name):
        context |= _AT_END
    else:
        after = name[position]
        context |= (_BEFORE_NEWLINE if after == "\n" else 0) | (
            _BEFORE_WORD if _is_word(after) else 0)
    return context


def _holds(kind: str, context: int) -> bool:
    if kind == "begin_text":
        return bool(context & _AT_START)
    if kind == "end_text":
        return bool(context & _AT_END)
    if kind == "begin_line":
        return bool(context & (_AT_START | _AFTER_NEWLINE))
    if kind == "end_line":
        return bool(context & (_AT_END | _BEFORE_NEWLINE))
    boundary = bool(context & _AFTER_WORD) != bool(context & _BEFORE_WORD)
    return boundary if kind == "word_boundary" else not boundary
