"""Regular-expression subscriptions of the consumer protocol (KIP-848's ``SubscribedTopicRegex``).

Kafka 4.0 resolves a member's regex on the broker, with RE2/J, against the
topic names, a topic matching when the whole name matches (``matches()``).
Folio uses Python's ``re`` with ``fullmatch``. The two agree on what a
topic name can contain (ASCII letters, digits, ``.``, ``_``, ``-``: no
newline, no Unicode, so ``$``, ``\\w`` and case folding mean the same), but
their syntaxes differ; ``check_regex`` refuses, as INVALID_REGULAR_EXPRESSION,
whatever Python's ``re`` does not compile and whatever it compiles that RE2
does not accept or reads otherwise:

- backreferences and octal escapes (``\\1``, ``(?P=name)``: RE2 has no
  backreferences, and reads ``\\1`` as octal), ``\\Z`` (RE2: no such escape),
  ``\\N``, ``\\u``, ``\\U`` (RE2 has none);
- lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups ``(?>``,
  conditionals ``(?(``, comments ``(?#``, possessive quantifiers (``a*+``);
- flags other than ``i``, ``m``, ``s`` (``x``, ``a``, ``L``, ``u``);
- ``{,n}`` (Python: 0 to n times; RE2: the literal text) and counts above
  1000 (RE2's limit);
- POSIX classes (``[[:alpha:]]``: RE2 has them, Python reads a set of characters).

What RE2 accepts and Python does not (``\\pL``, ``\\Q...\\E``, ``\\z``,
``(?U)``, a flag group in the middle of the pattern) is refused too: a
client is told, never given a different set of topics. Folio's system
topics (``broker.segments.names.is_system_topic``) never match: the caller
passes the user topics only.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

__all__ = ["check_regex", "matching"]

#: RE2's largest repetition count.
_MAX_REPEAT = 1000
_REPEAT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z-]*)[:)]")
_LOOKS = ("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?(", "(?#", "(?P=")


def check_regex(regex: str) -> str | None:
    """Why ``regex`` cannot be used (Kafka's message), or None if it can (module docstring)."""
    with warnings.catch_warnings():
        # Python warns where it may read a set otherwise in future ("[[", "--"): refused.
        warnings.simplefilter("error")
        try:
            re.compile(regex)
        except (re.error, FutureWarning) as error:
            return _invalid(regex, str(error))
    why = _not_re2(regex)
    return None if why is None else _invalid(regex, why)


def matching(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The ``topics`` whose whole name matches ``regex`` (checked by ``check_regex``)."""
    pattern = re.compile(regex)
    return frozenset(t for t in topics if pattern.fullmatch(t))


def _invalid(regex: str, why: str) -> str:
    return f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}."


def _not_re2(regex: str) -> str | None:
    """What in ``regex`` (compiled by Python) RE2 refuses or reads otherwise; None: nothing."""
    i, in_class = 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            why = _escape(regex[i + 1:i + 2])
            if why is not None:
                return why
            i += 2
            continue
        if in_class:
            if regex.startswith("[:", i):
                return "POSIX classes ([:name:]) are read otherwise by Python's re"
            in_class = c != "]"
            i += 1
            continue
        if c == "[":
            i += 1 + (regex[i + 1:i + 2] == "^")
            i += regex[i:i + 1] == "]"  # a first "]" is a literal in both
            in_class = True
            continue
        why = _group(regex, i) if c == "(" else None
        if why is not None:
            return why
        end = i + 1
        if c == "{":
            repeat = _REPEAT.match(regex, i)
            if repeat is not None and (repeat[1] or repeat[2]):
                if not repeat[1]:
                    return "{,n} is the literal text in RE2"
                if any(n and int(n) > _MAX_REPEAT for n in (repeat[1], repeat[3])):
                    return f"repetition counts above {_MAX_REPEAT} are not RE2 syntax"
                end = repeat.end()
            else:
                end = -1  # a literal "{"
        if (c in "*+?" or end > i + 1) and regex[end:end + 1] == "+":
            return "possessive quantifiers are not RE2 syntax"
        i = max(end, i + 1)
    return None


def _escape(escaped: str) -> str | None:
    """Why the escape of ``escaped`` is not RE2's (or read otherwise), or None."""
    if escaped.isdigit():
        return f"\\{escaped}: backreferences and octal escapes differ in RE2"
    if escaped in ("Z", "N", "u", "U"):
        return f"\\{escaped} is not RE2 syntax"
    return None


def _group(regex: str, i: int) -> str | None:
    """Why the group opening at ``i`` is not RE2's, or None."""
    if any(regex.startswith(look, i) for look in _LOOKS):
        return "lookaround, atomic groups, conditionals, comments and backreferences " \
               "are not RE2 syntax"
    flags = _FLAGS.match(regex, i)
    if flags is not None and set(flags[1]) - set("ims-"):
        return f"the flags (?{flags[1]}) are not RE2 syntax (only i, m, s)"
    return None
