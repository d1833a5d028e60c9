"""RE2 syntax (as RE2/J 1.8, Kafka's engine, parses it) translated to a Python ``re`` pattern.

``parse`` reads a regex token by token, as RE2/J's parser does, accepts
exactly what RE2/J accepts (refusing the rest with ``RE2SyntaxError``, whose
``description`` is RE2/J's), and writes a Python pattern matching the same
strings, with the regex's parse for ``re2_automaton`` beside it. Nothing is
left to Python's syntax or flags: every construct is written out in a form
Python reads one way only:

- literals as hex escapes or letters, classes as explicit sets (``re2_classes``);
- ``\\Q...\\E`` as its literal characters (a quantifier after it repeats the last);
- flags: ``i`` by folding literals and classes here (RE2/J's folding, not
  Python's ``IGNORECASE``), ``s`` by the set ``.`` stands for, ``m`` by the
  assertions ``^``/``$`` become, ``U`` by swapping each quantifier's
  greediness; a flag group applies to the rest of its group, alternatives too;
- ``^``, ``$``, ``\\A``, ``\\z`` as ``\\A``/``\\Z`` (Python's ``\\Z`` is RE2's
  ``\\z``: RE2's ``$`` never matches before a final newline), or, under ``m``,
  as lookarounds for a line's ends; ``\\b``/``\\B`` with ASCII word characters;
- every group as a non-capturing one (only whether a name matches is asked,
  and RE2's group names need not be Python identifiers).

RE2/J's own quirks are kept where they decide what is accepted: ``a{*`` is a
nested repetition (the literal ``{`` counts as one), ``x{01}`` and ``x{,3}``
are literal text, ``(?)`` is an empty flag group, ``(?<=`` is an invalid
named capture, ``\\C`` is refused (RE2 C++ has it; RE2/J does not).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.kafka.consumer_groups.re2_automaton import (
    Alternate,
    Assert,
    Chars,
    Concat,
    Node,
    Repeat,
)
from broker.kafka.consumer_groups.re2_classes import (
    ANY,
    Ranges,
    fold,
    is_unicode_class,
    negate,
    normalize,
    perl_class,
    posix_class,
    python_class,
    python_literal,
    unicode_class,
)
from broker.kafka.consumer_groups.re2_tokens import hex_escape, number, python_count

__all__ = ["RE2SyntaxError", "parse", "translate"]

# RE2/J's descriptions (Parser.java), what Kafka puts in its message.
INVALID_CHAR_RANGE = "invalid character class range"
INVALID_ESCAPE = "invalid escape sequence"
INVALID_NAMED_CAPTURE = "invalid named capture"
INVALID_PERL_OP = "invalid or unsupported Perl syntax"
INVALID_REPEAT_OP = "invalid nested repetition operator"
INVALID_REPEAT_SIZE = "invalid repeat count"
MISSING_BRACKET = "missing closing ]"
MISSING_PAREN = "missing closing )"
MISSING_REPEAT_ARGUMENT = "missing argument to repetition operator"
TRAILING_BACKSLASH = "trailing backslash at end of expression"
DUPLICATE_NAMED_CAPTURE = "duplicate capture group name"
#: RE2/J says "regexp/syntax: internal error" here; this is RE2 C++'s wording.
UNEXPECTED_PAREN = "unexpected )"
#: RE2 C++'s wording; RE2/J has no limit but overflows its stack some thousands deep.
NESTED_TOO_DEEPLY = "expression nested too deeply"

#: RE2's largest repetition count.
MAX_REPEAT = 1000
#: Deepest nesting of groups and repetitions (``((a)*)``: 3): Python's ``re`` and the
#: automaton recurse once or a few times per level, within Python's recursion limit.
MAX_DEPTH = 200

_FOLD_CASE, _MULTI_LINE, _DOT_NL, _UNGREEDY = 1, 2, 4, 8
_FLAG_BITS = {"i": _FOLD_CASE, "m": _MULTI_LINE, "s": _DOT_NL, "U": _UNGREEDY}
_ESCAPES = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_NEWLINE: Ranges = ((10, 10),)
# RE2's \b and \B (ASCII words), written out: Python's \B never matches an empty string.
_ASSERTIONS = {
    "begin_text": r"\A", "end_text": r"\Z", "begin_line": r"(?<![^\n])",
    "end_line": r"(?![^\n])",
    "word_boundary": r"(?:(?<=\w)(?!\w)|(?<!\w)(?=\w))".replace(r"\w", "[0-9A-Za-z_]"),
    "not_word_boundary": r"(?:(?<=\w)(?=\w)|(?<!\w)(?!\w))".replace(r"\w", "[0-9A-Za-z_]"),
}


class RE2SyntaxError(ValueError):
    """``regex`` is not RE2/J syntax: ``description`` (RE2/J's words) at ``fragment``."""

    def __init__(self, description: str, fragment: str) -> None:
        super().__init__(f"{description}: `{fragment}`")
        self.description = description
        self.fragment = fragment


@dataclass
class _Item:
    """A piece of the Python pattern and of the parse; ``unit``: a quantifier may follow
    ``text`` as it is."""

    text: str
    node: Node
    unit: bool = True
    depth: int = 1


@dataclass
class _Group:
    """An open group: its flags to restore at ``)``, its finished alternatives, the current one."""

    saved_flags: int
    alternatives: list[str] = field(default_factory=list)
    items: list[_Item] = field(default_factory=list)
    alternative_nodes: list[Node] = field(default_factory=list)
    depth: int = 0  # of its deepest item

    def text(self) -> str:
        return "|".join([*self.alternatives, "".join(i.text for i in self.items)])

    def end_alternative(self) -> None:
        self.alternatives.append("".join(i.text for i in self.items))
        self.alternative_nodes.append(Concat(tuple(i.node for i in self.items)))
        self.items = []

    def node(self) -> Node:
        last = Concat(tuple(i.node for i in self.items))
        return Alternate((*self.alternative_nodes, last)) if self.alternative_nodes else last


def translate(regex: str) -> str:
    """The Python pattern matching what RE2/J's ``regex`` matches (module docstring).

    Raises:
        RE2SyntaxError: RE2/J refuses ``regex``.
    """
    return parse(regex)[0]


def parse(regex: str) -> tuple[str, Node]:
    """(``translate(regex)``, the parse of ``regex`` for ``re2_automaton``).

    Raises:
        RE2SyntaxError: RE2/J refuses ``regex``.
    """
    return _Translator(regex).run()


class _Translator:
    """One pass over the regex (RE2/J's ``Parser.parseInternal``), writing Python as it goes."""

    def __init__(self, regex: str) -> None:
        self.regex = regex
        self.pos = 0
        self.flags = 0
        self.groups = [_Group(saved_flags=0)]
        self.names: set[str] = set()

    def run(self) -> tuple[str, Node]:
        regex = self.regex
        last_repeat = -1
        while self.pos < len(regex):
            repeat_at = -1
            c = regex[self.pos]
            if c == "(":
                self._open()
            elif c == "|":
                self.groups[-1].end_alternative()
                self.pos += 1
            elif c == ")":
                self._close()
            elif c == "^":
                self._assert("begin_line" if self.flags & _MULTI_LINE else "begin_text")
                self.pos += 1
            elif c == "$":
                self._assert("end_line" if self.flags & _MULTI_LINE else "end_text")
                self.pos += 1
            elif c == ".":
                self._chars(ANY if self.flags & _DOT_NL else negate(_NEWLINE))
                self.pos += 1
            elif c == "[":
                self._chars(self._class())
            elif c in "*+?":
                repeat_at = self.pos
                self.pos += 1
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                self._repeat(c, low, high, repeat_at, last_repeat)
            elif c == "{":
                repeat_at = self.pos
                count = self._count()
                if count is None:
                    # Not a count: a literal "{" (RE2/J still counts it as a repetition
                    # for the next operator's "nested repetition" check).
                    self.pos = repeat_at + 1
                    self._literal(ord("{"))
                else:
                    self._repeat(python_count(*count), *count, repeat_at, last_repeat)
            elif c == "\\":
                self._escape()
            else:
                self._literal(ord(c))
                self.pos += 1
            last_repeat = repeat_at
        if len(self.groups) > 1:
            raise RE2SyntaxError(MISSING_PAREN, regex)
        return self.groups[0].text(), self.groups[0].node()

    # -- pieces ---------------------------------------------------------------------

    def _push(self, text: str, node: Node, unit: bool = True, depth: int = 1) -> None:
        self.groups[-1].items.append(_Item(text, node, unit, self._depth(depth)))

    def _depth(self, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise RE2SyntaxError(NESTED_TOO_DEEPLY, self.regex[:self.pos])
        self.groups[-1].depth = max(self.groups[-1].depth, depth)
        return depth

    def _chars(self, ranges: Ranges) -> None:
        self._push(python_class(ranges), Chars(ranges))

    def _assert(self, kind: str) -> None:
        self._push(_ASSERTIONS[kind], Assert(kind), unit=False)

    def _literal(self, code_point: int) -> None:
        ranges: Ranges = ((code_point, code_point),)
        if self.flags & _FOLD_CASE:
            ranges = fold(ranges)
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            self._push(python_literal(code_point), Chars(ranges))
        else:
            self._chars(ranges)

    def _repeat(self, operator: str, low: int, high: int | None, at: int,
                last_repeat: int) -> None:
        """Apply ``operator`` (``*``, ``+``, ``?``, ``{n,m}`` in Python's spelling) to the
        last item; ``at``: where it started, ``last_repeat``: where the previous token did
        if it was a repetition too."""
        lazy = bool(self.flags & _UNGREEDY)
        if self.regex.startswith("?", self.pos):
            self.pos += 1
            lazy = not lazy
        if last_repeat != -1:
            raise RE2SyntaxError(INVALID_REPEAT_OP, self.regex[last_repeat:self.pos])
        items = self.groups[-1].items
        if not items:
            raise RE2SyntaxError(MISSING_REPEAT_ARGUMENT, self.regex[at:self.pos])
        item = items[-1]
        text = item.text if item.unit else f"(?:{item.text})"
        items[-1] = _Item(text + operator + ("?" if lazy else ""),
                          Repeat(item.node, low, high), False, self._depth(item.depth + 1))

    def _count(self) -> tuple[int, int | None] | None:
        """A ``{n}``, ``{n,}``, ``{n,m}`` at ``pos`` as Python writes it (and ``pos`` after it);
        None (``pos`` unchanged) if it is not one: RE2 reads it as literal text."""
        regex, start = self.regex, self.pos
        i = start + 1
        low, i = number(regex, i)
        if low is None or i >= len(regex):
            return None
        high: int | None = low
        if regex[i] == ",":
            i += 1
            if i >= len(regex):
                return None
            if regex[i] == "}":
                high = None
            else:
                high, i = number(regex, i)
                if high is None:
                    return None
        if i >= len(regex) or regex[i] != "}":
            return None
        i += 1
        if low < 0 or low > MAX_REPEAT or (high is not None and (
                high < 0 or high > MAX_REPEAT or low > high)):
            raise RE2SyntaxError(INVALID_REPEAT_SIZE, regex[start:i])
        self.pos = i
        return low, high

    # -- groups -----------------------------------------------------------------------

    def _open(self) -> None:
        regex, start = self.regex, self.pos
        if not regex.startswith("(?", start):
            self.groups.append(_Group(saved_flags=self.flags))
            self.pos += 1
            return
        rest = regex[start:]
        if rest.startswith(("(?P<", "(?<")):
            begin = 4 if rest[2] == "P" else 3
            end = rest.find(">", begin)
            if end < 0:
                raise RE2SyntaxError(INVALID_NAMED_CAPTURE, rest)
            name = rest[begin:end]
            if not name or not all(c == "_" or (c.isascii() and c.isalnum()) for c in name):
                raise RE2SyntaxError(INVALID_NAMED_CAPTURE, rest[:end + 1])
            if name in self.names:
                raise RE2SyntaxError(DUPLICATE_NAMED_CAPTURE, name)
            self.names.add(name)
            self.groups.append(_Group(saved_flags=self.flags))
            self.pos = start + end + 1
            return
        # Flags: (?flags) or (?flags:re), flags as "ims", "-ims" or "i-ms" (RE2/J's loop).
        i = start + 2
        flags, negative, saw_flag = self.flags, False, False
        while i < len(regex):
            c = regex[i]
            i += 1
            if c in _FLAG_BITS:
                flags = flags & ~_FLAG_BITS[c] if negative else flags | _FLAG_BITS[c]
                saw_flag = True
            elif c == "-" and not negative:
                negative, saw_flag = True, False
            elif c in ":)" and not (negative and not saw_flag):
                if c == ":":
                    self.groups.append(_Group(saved_flags=self.flags))
                self.flags = flags
                self.pos = i
                return
            else:
                break
        raise RE2SyntaxError(INVALID_PERL_OP, regex[start:i])

    def _close(self) -> None:
        if len(self.groups) == 1:
            raise RE2SyntaxError(UNEXPECTED_PAREN, self.regex)
        group = self.groups.pop()
        self.flags = group.saved_flags
        self._push(f"(?:{group.text()})", group.node(), depth=group.depth + 1)
        self.pos += 1

    # -- escapes ----------------------------------------------------------------------

    def _escape(self) -> None:
        regex, start = self.regex, self.pos
        c = regex[start + 1:start + 2]
        if c in ("A", "z"):
            self._assert("begin_text" if c == "A" else "end_text")
            self.pos += 2
        elif c in ("b", "B"):
            self._assert("word_boundary" if c == "b" else "not_word_boundary")
            self.pos += 2
        elif c == "C":
            raise RE2SyntaxError(INVALID_ESCAPE, "\\C")
        elif c == "Q":
            end = regex.find("\\E", start + 2)
            text = regex[start + 2:] if end < 0 else regex[start + 2:end]
            for char in text:
                self._literal(ord(char))
            self.pos = len(regex) if end < 0 else end + 2
        elif c in ("p", "P"):
            self._chars(self._unicode_class())
        elif (perl := perl_class(c)) is not None:
            self._chars(self._named(perl))
            self.pos += 2
        else:
            self._literal(self._escaped_char())

    def _escaped_char(self) -> int:
        """The character of the escape at ``pos`` (``\\n``, ``\\x41``, ``\\101``, ``\\.``);
        RE2/J's ``parseEscape``. ``pos`` ends after it."""
        regex, start = self.regex, self.pos
        i = start + 1
        if i >= len(regex):
            raise RE2SyntaxError(TRAILING_BACKSLASH, regex[start:])
        c = regex[i]
        i += 1
        value: int | None = None
        if c in "1234567" and not (i < len(regex) and regex[i] in "01234567"):
            value = None  # \1 to \7 alone: a backreference, not RE2
        elif c in "01234567":
            value = int(c)
            for _ in range(2):
                if i < len(regex) and regex[i] in "01234567":
                    value = value * 8 + int(regex[i])
                    i += 1
        elif c == "x":
            value, i = hex_escape(regex, i)
        elif c in _ESCAPES:
            value = _ESCAPES[c]
        elif not (c.isascii() and c.isalnum()):
            value = ord(c)  # any punctuation (or non-ASCII) escaped is itself
        if value is None:
            raise RE2SyntaxError(INVALID_ESCAPE, regex[start:i])
        self.pos = i
        return value

    def _unicode_class(self) -> Ranges:
        """``\\pN``, ``\\p{Name}``, ``\\p{^Name}``, ``\\PN`` at ``pos`` (``pos`` after it)."""
        regex, start = self.regex, self.pos
        negative = regex[start + 1] == "P"
        i = start + 2
        if i >= len(regex):
            raise RE2SyntaxError(INVALID_CHAR_RANGE, regex[start:])
        if regex[i] != "{":
            name = regex[i]
            i += 1
        else:
            end = regex.find("}", i + 1)
            if end < 0:
                raise RE2SyntaxError(INVALID_CHAR_RANGE, regex[start:])
            name = regex[i + 1:end]
            i = end + 1
        if name.startswith("^"):
            negative, name = not negative, name[1:]
        if not is_unicode_class(name):
            raise RE2SyntaxError(INVALID_CHAR_RANGE, regex[start:i])
        self.pos = i
        ranges = unicode_class(name, bool(self.flags & _FOLD_CASE))
        return negate(ranges) if negative else ranges

    def _named(self, named: tuple[Ranges, bool]) -> Ranges:
        """A Perl or POSIX class (positive, negated), folded before its negation as in
        RE2/J's ``appendGroup``."""
        positive, negated = named
        if self.flags & _FOLD_CASE:
            positive = fold(positive)
        return negate(positive) if negated else positive

    # -- classes ----------------------------------------------------------------------

    def _class(self) -> Ranges:
        """The class ``[...]`` at ``pos`` (RE2/J's ``parseClass``); ``pos`` after its ``]``."""
        regex, start = self.regex, self.pos
        self.pos += 1
        negative = regex.startswith("^", self.pos)
        self.pos += negative
        ranges: list[tuple[int, int]] = []
        first = True
        while self.pos >= len(regex) or regex[self.pos] != "]" or first:
            first = False
            at = self.pos
            if regex.startswith("[:", at):
                end = regex.find(":]", at)
                if end >= 0:
                    name = regex[at + 2:end]
                    posix = posix_class(name)
                    if posix is None:
                        raise RE2SyntaxError(INVALID_CHAR_RANGE, regex[at:end + 2])
                    ranges.extend(self._named(posix))
                    self.pos = end + 2
                    continue
            if regex.startswith(("\\p", "\\P"), at):
                ranges.extend(self._unicode_class())
                continue
            perl = perl_class(regex[at + 1:at + 2]) if regex.startswith("\\", at) else None
            if perl is not None:
                ranges.extend(self._named(perl))
                self.pos += 2
                continue
            low = self._class_char(start)
            high = low
            if regex.startswith("-", self.pos):
                if regex.startswith("-]", self.pos):
                    pass  # "[a-]": the "-" is read next, as a literal
                else:
                    self.pos += 1
                    high = self._class_char(start)
                    if high < low:
                        raise RE2SyntaxError(INVALID_CHAR_RANGE, regex[at:self.pos])
            item: Ranges = ((low, high),)
            ranges.extend(fold(item) if self.flags & _FOLD_CASE else item)
        self.pos += 1
        merged = normalize(ranges)
        return negate(merged) if negative else merged

    def _class_char(self, class_start: int) -> int:
        regex = self.regex
        if self.pos >= len(regex):
            raise RE2SyntaxError(MISSING_BRACKET, regex[class_start:])
        if regex[self.pos] == "\\":
            return self._escaped_char()
        self.pos += 1
        return ord(regex[self.pos - 1])

