"""Kerberos principal -> Kafka user name: Kafka's ``sasl.kerberos.principal.to.local.rules``.

A GSSAPI client authenticates as a Kerberos principal (``alice@FOLIO.TEST``,
``etl/host1.example.com@FOLIO.TEST``); the rules turn it into the short name
that becomes the connection's role (Kafka's ``User:<name>``), as Kafka's
``KerberosShortNamer`` does, and in the same syntax. The first rule that
applies wins; a principal no rule applies to is refused.

- ``DEFAULT``: a principal of the default realm (``krb5.conf``'s
  ``default_realm``) becomes its first component (``alice@FOLIO.TEST`` ->
  ``alice``, ``etl/host1@FOLIO.TEST`` -> ``etl``); one of another realm is
  not mapped by this rule.
- ``RULE:[n:format](match)s/pattern/replacement/g/L``: for principals of
  ``n`` components, ``format`` builds a string (``$0`` the realm, ``$1``
  the first component, ``$2`` the second); it must fully match ``match``
  (when given); then ``s/pattern/replacement/`` replaces the first match
  (every one with ``g``; ``$1`` in the replacement is the group); ``/L`` or
  ``/U`` lowers or uppers the result. E.g.
  ``RULE:[2:$1@$0](etl@FOLIO\\.TEST)s/.*/pipeline/`` maps every ``etl/host``
  to ``pipeline``.

Rules are separated by commas or spaces (``DEFAULT`` is Kafka's default).
Patterns are Python regular expressions, which agree with Java's on what
rules use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_RULES", "KerberosRules", "NoMatchingRuleError"]

#: Kafka's default ``sasl.kerberos.principal.to.local.rules``.
DEFAULT_RULES: Final = "DEFAULT"
# Kafka's KerberosShortNamer.RULE_PARSER, with separators between rules.
_RULE: Final = re.compile(
    r"[\s,]*(?:(?P<default>DEFAULT)|RULE:\[(?P<count>\d*):(?P<format>[^\]]*)\]"
    r"(?:\((?P<match>[^)]*)\))?(?:s/(?P<pattern>[^/]*)/(?P<replacement>[^/]*)/(?P<all>g)?)?"
    r"/?(?P<case>L|U)?)[\s,]*")
_PARAMETER: Final = re.compile(r"\$(\d+)")


class NoMatchingRuleError(Exception):
    """No rule maps the principal (the client is refused)."""


@dataclass(frozen=True)
class _Rule:
    default: bool
    count: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    all: bool = False
    case: str = ""

    def apply(self, components: list[str], realm: str, default_realm: str) -> str | None:
        if self.default:
            return components[0] if realm == default_realm else None
        if len(components) != self.count:
            return None
        params = [realm, *components]

        def parameter(found: re.Match[str]) -> str:
            index = int(found[1])
            if index >= len(params):
                raise NoMatchingRuleError(f"rule format {self.format!r} names ${index}, beyond "
                                          f"the principal's {len(components)} component(s)")
            return params[index]
        base = _PARAMETER.sub(parameter, self.format)
        if self.match is not None and not self.match.fullmatch(base):
            return None
        if self.pattern is not None:
            base = self.pattern.sub(self.replacement, base, count=0 if self.all else 1)
        if not base or "@" in base or "/" in base:
            raise NoMatchingRuleError(f"rule {self.format!r} makes {base!r} of the principal, "
                                      "not a simple name (no '@' nor '/')")
        return base.lower() if self.case == "L" else base.upper() if self.case == "U" else base


class KerberosRules:
    """Parsed ``sasl.kerberos.principal.to.local.rules`` (``ValueError`` if malformed)."""

    def __init__(self, text: str = DEFAULT_RULES) -> None:
        self.text = text
        self._rules: list[_Rule] = []
        position = 0
        while position < len(text.rstrip(" ,\t\n")):
            found = _RULE.match(text, position)
            if found is None or found.end() == position:
                raise ValueError(f"principal-to-local rules: cannot parse {text[position:]!r} "
                                 "(DEFAULT or RULE:[n:format](match)s/pattern/replacement/g/L)")
            position = found.end()
            self._rules.append(self._rule(found))
        if not self._rules:
            raise ValueError("principal-to-local rules: none given (DEFAULT maps "
                             "user@REALM to user)")

    @staticmethod
    def _rule(found: re.Match[str]) -> _Rule:
        if found["default"]:
            return _Rule(default=True)
        try:
            match = re.compile(found["match"]) if found["match"] is not None else None
            pattern = re.compile(found["pattern"]) if found["pattern"] is not None else None
        except re.error as error:
            raise ValueError(f"principal-to-local rules: bad regular expression in "
                             f"{found[0].strip()!r}: {error}") from None
        # Java's replacement groups are $1; Python's \g<1>.
        replacement = _PARAMETER.sub(r"\\g<\1>", found["replacement"] or "")
        return _Rule(False, int(found["count"] or 0), found["format"], match, pattern,
                     replacement, bool(found["all"]), found["case"] or "")

    def short_name(self, principal: str, default_realm: str) -> str:
        """The user name of ``principal`` (``name[/host]@REALM``), by the first rule that applies.

        Raises ``NoMatchingRuleError`` when none does.
        """
        name, at, realm = principal.rpartition("@")
        if not at:
            name, realm = principal, ""
        components = name.split("/")
        for rule in self._rules:
            short = rule.apply(components, realm, default_realm)
            if short is not None:
                return short
        raise NoMatchingRuleError(f"no principal-to-local rule maps {principal!r} (rules: "
                                  f"{self.text})")
