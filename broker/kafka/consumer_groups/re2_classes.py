"""The character classes of RE2/J (Kafka's regex engine) as sets of code point ranges.

A class is a sorted tuple of disjoint inclusive ``(low, high)`` code point
ranges; ``python_class`` writes one as a Python ``re`` character set. The
named classes are RE2/J 1.8's (the version Kafka 4 uses):

- Perl classes ``\\d \\s \\w`` and POSIX classes ``[:alpha:]``: ASCII only, as in RE2.
- Unicode general categories (``\\pL``, ``\\p{Lu}``, RE2/J's names: no ``Cn``,
  no ``LC``), built once, when first needed, from ``unicodedata``: Python's
  Unicode version is newer than RE2/J's (6.0), which differs only outside ASCII.
- Unicode scripts (``\\p{Greek}``): the standard library has no script data,
  so a script is what it is on ASCII, the alphabet of topic names
  (``[A-Za-z0-9._-]``): ``Latin`` is ``A-Za-z``, ``Common`` the rest of ASCII,
  every other script (and ``Unknown``) no ASCII character. A regex is only
  ever matched against topic names, where this is exact; outside ASCII a
  script matches nothing (written in docs/kafka.md). The names are RE2/J's,
  so a script RE2/J does not know is refused as Kafka refuses it.
- ``Any``: every code point.

Case folding (``(?i)``) follows RE2/J too: a literal or range gains its
simple case folding orbit (``k``: ``kK`` and the Kelvin sign); a Unicode
category gains RE2/J's fold table, which, as generated for RE2/J 1.8, adds
the lower case of each member and the whole orbit only of members with an
orbit of three or more: ``(?i)\\p{Lu}`` matches ``a``, but ``(?i)\\p{Ll}``
matches only ``K`` and ``S`` of the ASCII capitals, as in Kafka.
"""

from __future__ import annotations

import bisect
import sys
import unicodedata
from collections.abc import Iterable
from functools import cache

__all__ = [
    "ANY", "Ranges", "category", "fold", "is_unicode_class", "negate", "normalize",
    "perl_class", "posix_class", "python_class", "python_literal", "unicode_class",
]

Ranges = tuple[tuple[int, int], ...]

MAX_CODE_POINT = sys.maxunicode
ANY: Ranges = ((0, MAX_CODE_POINT),)

_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
#: RE2's ``\\s``: no vertical tab (``[:space:]`` has it).
_SPACE: Ranges = ((0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20))

_PERL: dict[str, Ranges] = {"d": _DIGIT, "s": _SPACE, "w": _WORD}

_POSIX: dict[str, Ranges] = {
    "alnum": ((0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)),
    "alpha": ((0x41, 0x5A), (0x61, 0x7A)),
    "ascii": ((0x00, 0x7F),),
    "blank": ((0x09, 0x09), (0x20, 0x20)),
    "cntrl": ((0x00, 0x1F), (0x7F, 0x7F)),
    "digit": _DIGIT,
    "graph": ((0x21, 0x7E),),
    "lower": ((0x61, 0x7A),),
    "print": ((0x20, 0x7E),),
    "punct": ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)),
    "space": ((0x09, 0x0D), (0x20, 0x20)),
    "upper": ((0x41, 0x5A),),
    "word": _WORD,
    "xdigit": ((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
}

#: RE2/J 1.8's general categories (``UnicodeTables.CATEGORIES``).
_CATEGORIES = frozenset({
    "C", "Cc", "Cf", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn",
    "N", "Nd", "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps",
    "S", "Sc", "Sk", "Sm", "So", "Z", "Zl", "Zp", "Zs",
})

#: RE2/J 1.8's scripts (``UnicodeTables.SCRIPTS``, Unicode 6.0).
_SCRIPTS = frozenset({
    "Arabic", "Armenian", "Avestan", "Balinese", "Bamum", "Batak", "Bengali", "Bopomofo",
    "Brahmi", "Braille", "Buginese", "Buhid", "Canadian_Aboriginal", "Carian", "Cham",
    "Cherokee", "Common", "Coptic", "Cuneiform", "Cypriot", "Cyrillic", "Deseret",
    "Devanagari", "Egyptian_Hieroglyphs", "Ethiopic", "Georgian", "Glagolitic", "Gothic",
    "Greek", "Gujarati", "Gurmukhi", "Han", "Hangul", "Hanunoo", "Hebrew", "Hiragana",
    "Imperial_Aramaic", "Inherited", "Inscriptional_Pahlavi", "Inscriptional_Parthian",
    "Javanese", "Kaithi", "Kannada", "Katakana", "Kayah_Li", "Kharoshthi", "Khmer", "Lao",
    "Latin", "Lepcha", "Limbu", "Linear_B", "Lisu", "Lycian", "Lydian", "Malayalam",
    "Mandaic", "Meetei_Mayek", "Mongolian", "Myanmar", "New_Tai_Lue", "Nko", "Ogham",
    "Ol_Chiki", "Old_Italic", "Old_Persian", "Old_South_Arabian", "Old_Turkic", "Oriya",
    "Osmanya", "Phags_Pa", "Phoenician", "Rejang", "Runic", "Samaritan", "Saurashtra",
    "Shavian", "Sinhala", "Sundanese", "Syloti_Nagri", "Syriac", "Tagalog", "Tagbanwa",
    "Tai_Le", "Tai_Tham", "Tai_Viet", "Tamil", "Telugu", "Thaana", "Thai", "Tibetan",
    "Tifinagh", "Ugaritic", "Unknown", "Vai", "Yi",
})
_LATIN: Ranges = ((0x41, 0x5A), (0x61, 0x7A))
_COMMON: Ranges = ((0x00, 0x40), (0x5B, 0x60), (0x7B, 0x7F))


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """``ranges`` sorted, with overlapping and adjacent ones merged."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return tuple(merged)


def negate(ranges: Ranges) -> Ranges:
    """Every code point not in (normalized) ``ranges``."""
    out: list[tuple[int, int]] = []
    next_low = 0
    for low, high in ranges:
        if low > next_low:
            out.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= MAX_CODE_POINT:
        out.append((next_low, MAX_CODE_POINT))
    return tuple(out)


def perl_class(letter: str) -> tuple[Ranges, bool] | None:
    """``\\d \\D \\s \\S \\w \\W`` by letter as (the positive class, negated);
    None for another letter."""
    positive = _PERL.get(letter.lower()) if letter.isascii() else None
    return None if positive is None else (positive, letter.isupper())


def posix_class(name: str) -> tuple[Ranges, bool] | None:
    """``alpha`` or ``^alpha`` (the inside of ``[:...:]``) as (the positive class,
    negated); None for an unknown name."""
    positive = _POSIX.get(name.removeprefix("^"))
    return None if positive is None else (positive, name.startswith("^"))


def is_unicode_class(name: str) -> bool:
    """Whether RE2/J knows ``name`` after ``\\p`` (a category, a script or ``Any``)."""
    return name == "Any" or name in _CATEGORIES or name in _SCRIPTS


def unicode_class(name: str, fold_case: bool) -> Ranges:
    """The class ``\\p{name}`` (``is_unicode_class``), with RE2/J's fold table if ``fold_case``."""
    if name == "Any":
        return ANY
    if name in _SCRIPTS:
        # RE2/J's script fold tables (Common, Inherited, Greek) hold no ASCII character.
        return _LATIN if name == "Latin" else _COMMON if name == "Common" else ()
    return _folded_category(name) if fold_case else category(name)


@cache
def category(name: str) -> Ranges:
    """The code points of general category ``name`` (one letter: the union, ``C`` without Cn)."""
    tables = _category_tables()
    if len(name) == 2:
        return tables.get(name, ())
    return normalize(r for sub, ranges in tables.items()
                     if sub[0] == name and sub != "Cn" for r in ranges)


@cache
def _category_tables() -> dict[str, Ranges]:
    """Every two-letter category's ranges, from one pass over the code points."""
    tables: dict[str, list[tuple[int, int]]] = {}
    start, current = 0, unicodedata.category("\0")
    for code_point in range(1, MAX_CODE_POINT + 2):
        here = unicodedata.category(chr(code_point)) if code_point <= MAX_CODE_POINT else ""
        if here != current:
            tables.setdefault(current, []).append((start, code_point - 1))
            start, current = code_point, here
    return {name: tuple(ranges) for name, ranges in tables.items()}


@cache
def _folded_category(name: str) -> Ranges:
    """``category(name)`` with RE2/J 1.8's fold table for it (module docstring)."""
    table = category(name)
    cased, orbits = _orbits()
    added: set[int] = set()
    for low, high in table:
        for index in range(bisect.bisect_left(cased, low), bisect.bisect_right(cased, high)):
            code_point = cased[index]
            orbit = orbits[code_point]
            if len(orbit) > 2:
                added.update(orbit)
            else:
                lower = chr(code_point).lower()
                if len(lower) == 1:
                    added.add(ord(lower))
    return normalize([*table, *((c, c) for c in added)])


def fold(ranges: Ranges) -> Ranges:
    """``ranges`` with every member's simple case folding orbit (RE2/J's ``(?i)``)."""
    cased, orbits = _orbits()
    added: list[tuple[int, int]] = []
    for low, high in ranges:
        for index in range(bisect.bisect_left(cased, low), bisect.bisect_right(cased, high)):
            added.extend((c, c) for c in orbits[cased[index]])
    return normalize([*ranges, *added]) if added else ranges


@cache
def _orbits() -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """(sorted code points with case, each one's orbit): the code points that fold to the
    same one (``k``, ``K`` and the Kelvin sign), approximating Unicode's simple case
    folding by Python's ``casefold`` where it gives one character (``\u0131``, dotless i,
    stays alone, as in RE2/J)."""
    members: dict[int, list[int]] = {}
    for code_point in range(MAX_CODE_POINT + 1):
        folded = chr(code_point).casefold()
        if len(folded) == 1 and ord(folded) != code_point:
            members.setdefault(ord(folded), [ord(folded)]).append(code_point)
    orbits = {c: tuple(sorted(group)) for group in members.values() for c in group}
    return sorted(orbits), orbits


def python_class(ranges: Ranges) -> str:
    """``ranges`` as a Python ``re`` set (one that matches nothing if ``ranges`` is empty)."""
    if not ranges:
        return "[^" + _python_char(0) + "-" + _python_char(MAX_CODE_POINT) + "]"
    parts = [_python_char(low) if low == high else
             f"{_python_char(low)}-{_python_char(high)}" for low, high in ranges]
    return "[" + "".join(parts) + "]"


def python_literal(code_point: int) -> str:
    """``code_point`` as a Python ``re`` literal, valid inside and outside a set."""
    return _python_char(code_point)


def _python_char(code_point: int) -> str:
    char = chr(code_point)
    if char.isascii() and (char.isalnum() or char == "_"):
        return char
    if code_point <= 0xFF:
        return f"\\x{code_point:02x}"
    if code_point <= 0xFFFF:
        return f"\\u{code_point:04x}"
    return f"\\U{code_point:08x}"
