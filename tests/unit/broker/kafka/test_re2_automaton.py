"""The linear-time matcher of parsed RE2 regexes (``re2_automaton``) without a broker.

It answers every row of test_re2_syntax.py's table as RE2 does (and as the
Python translation does), agrees with the translation where the context of
an empty-width assertion matters (lines, word boundaries), answers regexes
Python's backtracking ``re`` would take exponential time on at once for
249-character names (this test would not end otherwise), and too large an
automaton falls back to the Python translation.
"""

from __future__ import annotations

import re

import pytest

from broker.kafka.consumer_groups.re2_automaton import (
    MAX_STATES,
    Automaton,
    AutomatonTooLargeError,
)
from broker.kafka.consumer_groups.re2_syntax import parse
from broker.kafka.consumer_groups.topic_regex import check_regex, matching
from tests.unit.broker.kafka.test_re2_syntax import MATCHES


@pytest.mark.parametrize(("regex", "matching_names", "not_matching"), MATCHES)
def test_the_automaton_matches_what_re2_matches(
        regex: str, matching_names: tuple[str, ...], not_matching: tuple[str, ...]) -> None:
    automaton = Automaton(parse(regex)[1])
    assert [n for n in matching_names if not automaton.fullmatch(n)] == []
    assert [n for n in not_matching if automaton.fullmatch(n)] == []


@pytest.mark.parametrize("regex", [
    r"(?m)^b", r"(?m)a$\n^b", r"(?m)(^|x)b", r"a$\nb", r"\bb", r"a\b \bb", r"\B", r"a\B ",
    r"(?s)a.b", r"a.b", r"(?m)a\n^$", r"(\b|x)*a",
])
def test_assertions_in_context_agree_with_the_translation(regex: str) -> None:
    text, node = parse(regex)
    automaton, pattern = Automaton(node), re.compile(text)
    for name in ("a\nb", "b", "a b", "a\n", "", "ab", "a\n\n", "xb", "a", " ", "a ", "a\tb"):
        assert automaton.fullmatch(name) == bool(pattern.fullmatch(name)), (regex, name)


@pytest.mark.parametrize("regex", ["(a|a)*b", "(a*)*b", "(a|aa)*c", "(.*a){20}b", r"(\w+\.?)*x"])
def test_a_backtracking_regex_is_matched_in_linear_time(regex: str) -> None:
    names = ["a" * 249, "a" * 248 + "b", "a" * 248 + "c", "a." * 124 + "x"]
    assert check_regex(regex) is None
    answer = matching(regex, names)
    wanted = {"(a|a)*b": "a" * 248 + "b", "(a*)*b": "a" * 248 + "b",
              "(a|aa)*c": "a" * 248 + "c", "(.*a){20}b": "a" * 248 + "b",
              r"(\w+\.?)*x": "a." * 124 + "x"}[regex]
    assert answer == {wanted}


def test_too_large_an_automaton_falls_back_to_the_translation() -> None:
    with pytest.raises(AutomatonTooLargeError):
        Automaton(parse("(a{1000}){1000}")[1])
    assert MAX_STATES < 1_000_000
    assert check_regex("(a{1000}){1000}") is None
    assert matching("(a{1000}){1000}", ["a", "b"]) == frozenset()
    assert matching("(a{1000}){1000}|b", ["a", "b"]) == {"b"}
