"""Lexical pieces of RE2 syntax as RE2/J 1.8 reads them: counts, hex escapes."""

from __future__ import annotations

__all__ = ["hex_escape", "number", "python_count"]


def number(regex: str, i: int) -> tuple[int | None, int]:
    """(the decimal at ``i``, where it ends): None if absent or with a leading zero,
    -1 if longer than 8 digits (RE2/J's ``parseInt``)."""
    end = i
    while end < len(regex) and regex[end] in "0123456789":
        end += 1
    digits = regex[i:end]
    if not digits or (len(digits) > 1 and digits[0] == "0"):
        return None, end
    return (-1 if len(digits) > 8 else int(digits)), end


def hex_escape(regex: str, i: int) -> tuple[int | None, int]:
    """(the code point of ``\\x41`` or ``\\x{10FFFF}`` after its ``x`` at ``i``, its end);
    None if malformed or above U+10FFFF."""
    if i >= len(regex):
        return None, i
    if regex[i] == "{":
        end = regex.find("}", i + 1)
        digits = regex[i + 1:end] if end >= 0 else regex[i + 1:]
        stop = end + 1 if end >= 0 else len(regex)
        if end < 0 or not digits or any(c not in "0123456789abcdefABCDEF" for c in digits):
            return None, stop
        value = int(digits, 16)
        return (value if value <= 0x10FFFF else None), stop
    digits = regex[i:i + 2]
    if len(digits) < 2 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        return None, min(i + 2, len(regex))
    return int(digits, 16), i + 2


def python_count(low: int, high: int | None) -> str:
    """A count as Python writes it: ``{2}``, ``{2,}``, ``{2,5}``."""
    return f"{{{low}}}" if high == low else f"{{{low},}}" if high is None \
        else f"{{{low},{high}}}"
