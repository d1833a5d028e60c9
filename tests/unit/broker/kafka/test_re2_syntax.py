"""RE2 syntax (RE2/J 1.8, Kafka's engine) translated to Python ``re``: a table of patterns.

Each row is an RE2 pattern with topic names it must fully match and names it
must not, as RE2's syntax reference (google/re2 doc/syntax.txt) and RE2/J's
parser define them; every row (and tens of thousands of random patterns)
was also checked against RE2/J 1.8 itself, compiled from its source, when
this was written (``matches()`` per name, ``getDescription()`` per refusal).
The refusals carry RE2/J's description, which Kafka puts in its answer.
"""

from __future__ import annotations

import re

import pytest

from broker.errors import TopicNameError
from broker.kafka.consumer_groups.re2_syntax import MAX_DEPTH, RE2SyntaxError, translate
from broker.segments.names import check_topic_name

MATCHES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    # Unicode general categories and scripts (on topic names: ASCII).
    (r"\pL+", ("orders", "EU"), ("orders-eu", "a1")),
    (r"\p{L}+-\p{Nd}+", ("eu-12",), ("eu-1a", "12-eu")),
    (r"\PL+", ("0.9_-",), ("a",)),
    (r"\p{^L}", ("-",), ("a",)),
    (r"\P{^L}", ("a",), ("-",)),
    (r"\p{Lu}\p{Ll}+", ("Orders",), ("orders", "ORDERS")),
    (r"\p{Pd}\p{Pc}\p{Po}", ("-_.",), ("_-.",)),
    (r"\p{Greek}*orders", ("orders",), ("xorders",)),
    (r"[\p{Greek}a]+", ("aa",), ("ab",)),
    (r"\P{Greek}+", ("orders-eu.1_",), ()),
    (r"\p{Latin}+", ("Orders",), ("orders1",)),
    (r"\p{Common}+", ("0._-",), ("a",)),
    (r"\p{Any}+", ("any.thing-1",), ()),
    (r"[^\p{Latin}]+", ("1.2",), ("a",)),
    # Quoted text.
    (r"\Qorders.eu\E", ("orders.eu",), ("ordersxeu",)),
    (r"^\Qa.b\E-.*", ("a.b-1",), ("axb-1",)),
    (r"\Qa.b", ("a.b",), ("axb",)),  # no \E: to the end
    (r"\Qab\E+", ("abbb",), ("abab",)),  # the quantifier repeats the last character
    (r"a\Q\E*", ("aaa",), ("b",)),
    # Empty strings.
    (r"orders\z", ("orders",), ("orders1",)),
    (r"\Aorders$", ("orders",), ()),
    (r"^a^b", (), ("ab", "a")),
    (r"(?m)a$", ("a",), ()),
    (r"a\bb", (), ("ab",)),
    (r"a\b-b", ("a-b",), ()),
    (r"a\Bb", ("ab",), ("a-b",)),
    (r"\b*a", ("a",), ()),  # RE2 repeats an empty-width assertion
    (r"^*a", ("a",), ()),
    # POSIX classes in brackets.
    (r"[[:alpha:]]+", ("Orders",), ("orders1",)),
    (r"[[:^alpha:]]+", ("1.2",), ("a",)),
    (r"[^[:alpha:]]", ("1",), ("a",)),
    (r"[[:alnum:]_.-]+", ("orders_1.eu-2",), ()),
    (r"[[:upper:][:digit:]]+", ("EU27",), ("eu27",)),
    (r"[[:punct:]]+", ("._-",), ("a",)),
    (r"[[:word:]]+", ("a_1",), ("a-1",)),
    (r"[[:xdigit:]]+", ("0aF9",), ("g",)),
    (r"[[:alpha]+", ("a:", "[[a"), ("b",)),  # no ":]": a plain set
    (r"[:alpha:]", ("a", ":"), ("b",)),  # outside brackets: a plain set
    # Flags: i, m, s, U, anywhere, scoped to their group.
    (r"(?i)orders", ("ORDERS", "Orders"), ()),
    (r"a(?i)b", ("aB",), ("AB",)),
    (r"a(?i)b|c", ("C", "ab"), ("Ab",)),  # the flag reaches the next alternative
    (r"(a(?i)b)c", ("aBc",), ("aBC",)),  # and ends with its group
    (r"(?i:a)b", ("Ab",), ("AB",)),
    (r"(?i)a(?-i)b", ("Ab",), ("AB",)),
    (r"(?i)[a-c]+", ("AbC",), ("d",)),
    (r"(?i)[^k]", ("a",), ("K", "k")),
    (r"(?i)[[:lower:]]+", ("AbC",), ("1",)),
    (r"(?i)\p{Lu}", ("a", "A"), ()),
    (r"(?i)\p{Ll}", ("a", "K", "S"), ("A",)),  # RE2/J 1.8's fold table for Ll
    (r"(?i)\P{Ll}", ("5",), ("a", "K")),
    (r"(?U)a+", ("aaa",), ()),
    (r"(?U)a+?b", ("aab",), ("aa",)),
    (r"(?s).", ("x",), ()),
    (r"(?)a", ("a",), ()),
    (r"(?i-i)a", ("a",), ("A",)),
    # Groups and names.
    (r"(?P<region>eu|us)-orders", ("eu-orders",), ("asia-orders",)),
    (r"(?<region>eu|us)-orders", ("us-orders",), ()),
    (r"(?P<1st>a)", ("a",), ()),  # RE2 names need not be Python identifiers
    # Escapes.
    (r"\x41\x{62}\101", ("AbA",), ()),
    (r"\12", (), ("12", "a")),  # octal: a newline
    (r"a\-b\.c\_", ("a-b.c_",), ()),
    (r"\d+\w*\S", ("12a.",), ("12a ",)),
    # Repetitions and literal braces.
    (r"a{2}", ("aa",), ("a", "aaa")),
    (r"a{2,}", ("aaaa",), ("a",)),
    (r"a{1,3}?", ("aaa",), ("aaaa",)),
    (r"a{,2}", ("a{,2}",), ("aa",)),  # not a count: literal text
    (r"a{01}", ("a{01}",), ("a",)),
    (r"{}a{", ("{}a{",), ()),
    (r"a{1000}", ("a" * 1000,), ("a" * 999,)),
    (r"a*\Q\E*", ("aa",), ()),
    # Classes.
    (r"[]a]+", ("]a",), ()),
    (r"[^]a]", ("b",), ("]", "a")),
    (r"[a-]+", ("a-",), ()),
    (r"[a-b-d]+", ("a-bd",), ("c",)),
    (r"[\d-z]+", ("1-z",), ("a",)),
    (r"[[]", ("[",), ()),
]

REFUSED: list[tuple[str, str]] = [
    (r"(a)\1", "invalid escape sequence"),  # backreferences
    (r"\8", "invalid escape sequence"),
    (r"(?P<n>a)(?P=n)", "invalid or unsupported Perl syntax"),
    (r"a(?=b)", "invalid or unsupported Perl syntax"),  # lookahead
    (r"a(?!b)", "invalid or unsupported Perl syntax"),
    (r"(?<=a)b", "invalid named capture"),  # lookbehind, as RE2/J reads it
    (r"(?<!a)b", "invalid named capture"),
    (r"(?>ab)", "invalid or unsupported Perl syntax"),  # atomic group
    (r"(?#note)a", "invalid or unsupported Perl syntax"),
    (r"(?x)a", "invalid or unsupported Perl syntax"),
    (r"(?-)a", "invalid or unsupported Perl syntax"),
    (r"(?i-)a", "invalid or unsupported Perl syntax"),
    (r"a*+", "invalid nested repetition operator"),  # possessive
    (r"a{2}+", "invalid nested repetition operator"),
    (r"a**", "invalid nested repetition operator"),
    (r"a*??", "invalid nested repetition operator"),
    (r"a{*", "invalid nested repetition operator"),  # RE2/J counts the literal "{"
    (r"*a", "missing argument to repetition operator"),
    (r"a|*", "missing argument to repetition operator"),
    (r"(?i)*", "missing argument to repetition operator"),
    (r"x{1001}", "invalid repeat count"),
    (r"x{2,1}", "invalid repeat count"),
    (r"\C", "invalid escape sequence"),  # RE2 C++ has it; RE2/J (Kafka) does not
    (r"a\Z", "invalid escape sequence"),
    (r"\E", "invalid escape sequence"),
    (r"[\b]", "invalid escape sequence"),
    (r"\x{110000}", "invalid escape sequence"),
    (r"\xg1", "invalid escape sequence"),
    ("a\\\\\\", "trailing backslash at end of expression"),
    (r"\p{Foo}", "invalid character class range"),
    (r"\p{Adlam}", "invalid character class range"),  # newer than RE2/J's Unicode 6.0
    (r"\p{LC}", "invalid character class range"),
    (r"\p", "invalid character class range"),
    (r"\p{L", "invalid character class range"),
    (r"[[:foo:]]", "invalid character class range"),
    (r"[z-a]", "invalid character class range"),
    (r"[a-\d]", "invalid escape sequence"),
    (r"[]", "missing closing ]"),
    (r"[[:alpha:]", "missing closing ]"),
    (r"(orders", "missing closing )"),
    (r"orders)", "unexpected )"),
    (r"(?P<a>x)(?<a>y)", "duplicate capture group name"),
    (r"(?P<a-b>x)", "invalid named capture"),
    (r"(?P<>x)", "invalid named capture"),
]


@pytest.mark.parametrize(("regex", "matching", "not_matching"), MATCHES)
def test_a_translated_pattern_matches_what_re2_matches(
        regex: str, matching: tuple[str, ...], not_matching: tuple[str, ...]) -> None:
    pattern = re.compile(translate(regex))
    assert [n for n in matching if pattern.fullmatch(n) is None] == []
    assert [n for n in not_matching if pattern.fullmatch(n) is not None] == []


@pytest.mark.parametrize(("regex", "description"), REFUSED)
def test_what_re2j_refuses_is_refused_with_its_description(regex: str, description: str) -> None:
    with pytest.raises(RE2SyntaxError) as raised:
        translate(regex)
    assert raised.value.description == description
    assert str(raised.value).startswith(f"{description}: `")


def test_topic_names_are_ascii_which_the_script_classes_rely_on() -> None:
    """A script is exact on ASCII only (``re2_classes``): a topic name cannot hold more."""
    with pytest.raises(TopicNameError):
        check_topic_name("orders-\u03b1")
    check_topic_name("orders-a")


def test_the_quantifier_swap_of_ungreedy_is_written_out() -> None:
    assert translate("(?U)a+") == "a+?"
    assert translate("(?U)a+?") == "a+"
    assert translate("(?U:a*)b*") == "(?:a*?)b*"


def test_case_folding_follows_unicode_orbits() -> None:
    kelvin, long_s = "\u212a", "\u017f"
    assert re.fullmatch(translate("(?i)k"), kelvin)
    assert re.fullmatch(translate(f"(?i){long_s}"), "S")
    assert re.fullmatch(translate("(?i)i"), "\u0131") is None  # dotless i: its own orbit


def test_nesting_deeper_than_python_can_recurse_is_refused() -> None:
    """RE2/J has no limit (its stack overflows some thousands deep); Folio refuses
    past ``MAX_DEPTH`` groups and repetitions in one another, with RE2 C++'s words."""
    deepest = "(" * (MAX_DEPTH - 1) + "a" + ")" * (MAX_DEPTH - 1)
    assert re.fullmatch(translate(deepest), "a")
    for regex in ("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH, "a" + "*\\Q\\E" * MAX_DEPTH):
        with pytest.raises(RE2SyntaxError) as raised:
            translate(regex)
        assert raised.value.description == "expression nested too deeply"
