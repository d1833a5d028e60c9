"""Layered settings of the server commands: defaults < TOML file < environment < flags.

One resolver for ``folio bookie``, ``folio broker`` and ``folio standalone``
(the broker imports it from here, the layer below; the SDK cannot). A
component's settings are frozen dataclasses that check themselves in
``__post_init__``; this module only finds each field's value, in this order,
the later winning:

1. the field's default;
2. the component's table of a TOML file given by ``--config FILE`` (or
   ``FOLIO_<COMPONENT>_CONFIG``): ``[broker]``, ``[bookie]`` or
   ``[standalone]``, keys named as the fields. A file may hold the tables of
   several components (one file for a local cluster); a command reads its own
   table, refuses keys it does not know in it, and ignores the others;
3. the environment, ``FOLIO_<COMPONENT>_<FIELD>`` (``FOLIO_BROKER_PORT``; an
   empty value counts as unset);
4. the command's flags, ``--<field-with-dashes>``.

``--print-config`` prints the result as TOML (``to_toml``) that ``--config``
reads back unchanged. Field types may be ``str``, ``int``, ``float``, ``bool``
or a ``str``-valued ``Enum``; a bad value raises ``ValueError`` naming where it
came from (``FOLIO_BOOKIE_PORT='seventy': ...``), which the commands print as a
usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tomllib
import typing
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any, Final, TypeVar

__all__ = ["ENV_PREFIX", "Layers", "add_arguments", "env_name", "to_toml"]

#: Environment variables are ``FOLIO_<COMPONENT>_<FIELD>``.
ENV_PREFIX: Final = "FOLIO_"

T = TypeVar("T")

_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})


def env_name(component: str, field: str) -> str:
    """``FOLIO_BROKER_PORT`` for component ``broker``, field ``port``."""
    return f"{ENV_PREFIX}{component.upper()}_{field.upper()}"


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _fields(cls: type) -> list[tuple[dataclasses.Field[Any], type]]:
    hints = typing.get_type_hints(cls)
    fields = []
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if not (kind in (str, int, float, bool)
                or (isinstance(kind, type) and issubclass(kind, Enum))):
            raise TypeError(f"{cls.__name__}.{field.name}: settings cannot hold {kind!r}")
        fields.append((field, kind))
    return fields


def _from_text(kind: type, raw: str) -> object:
    """A value of ``kind`` from text (an environment variable)."""
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in _TRUE | _FALSE:
            return lowered in _TRUE
        raise ValueError("expected true or false")
    return kind(raw)


def _from_toml(kind: type, value: object) -> object:
    """A value of ``kind`` from a TOML value, refusing the wrong TOML type."""
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in (str, bool) and type(value) is kind:
        return value
    if isinstance(kind, type) and issubclass(kind, Enum) and isinstance(value, str):
        return kind(value)
    wanted = {int: "an integer", float: "a number", bool: "true or false"}.get(kind, "a string")
    raise ValueError(f"expected {wanted}")


def add_arguments(parser: argparse.ArgumentParser, classes: Iterable[type], *, component: str,
                  help: Mapping[str, str], skip: Iterable[str] = ()) -> None:
    """Add a flag per field of ``classes`` (None: not given), ``--config``, ``--print-config``.

    Args:
        parser: the command's parser.
        classes: the component's config dataclasses, in the order their flags are shown.
        component: ``bookie``, ``broker`` ... (the TOML table and the environment prefix).
        help: each field's help text.
        skip: fields that get no flag (nor file key nor variable): they keep their default.
    """
    skipped = set(skip)
    for cls in classes:
        for field, kind in _fields(cls):
            if field.name in skipped:
                continue
            flag, text = _flag(field.name), help.get(field.name)
            if kind is bool:
                parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                                    help=text)
            elif issubclass(kind, Enum):
                choices = [member.value for member in kind]
                parser.add_argument(flag, type=kind, choices=list(kind),
                                    metavar="{" + ",".join(choices) + "}", help=text)
            else:
                parser.add_argument(flag, type=kind, metavar=field.name.upper(), help=text)
    parser.add_argument(
        "--config", metavar="FILE",
        help=f"read settings from the [{component}] table of this TOML file (keys as the "
        f"options, with _ for -; what --print-config prints); the environment and flags "
        f"override it (also {env_name(component, 'config')})")
    parser.add_argument(
        "--print-config", action="store_true",
        help="print the resulting settings as TOML (what --config reads) and exit")


class Layers:
    """The values of one component's settings, layered; ``build`` makes each dataclass.

    Args:
        component: ``bookie``, ``broker`` ...: the TOML table and the environment prefix.
        environ: the environment (``os.environ``).
        flags: parsed flags by field name, None meaning not given (``vars(args)``).
        config_file: the TOML file (``--config``), if any; else
            ``FOLIO_<COMPONENT>_CONFIG`` from ``environ``, if set.

    Raises:
        ValueError: the file cannot be read, is not TOML or has no table for ``component``.
    """

    def __init__(self, component: str, environ: Mapping[str, str],
                 flags: Mapping[str, object], config_file: str | None = None) -> None:
        self.component = component
        self._environ = environ
        self._flags = flags
        self._path = config_file or environ.get(env_name(component, "config")) or None
        self._file: dict[str, object] = self._read(self._path) if self._path else {}

    @classmethod
    def from_args(cls, component: str, args: argparse.Namespace,
                  environ: Mapping[str, str]) -> Layers:
        """Layers of a command parsed with ``add_arguments``."""
        flags = vars(args)
        config = flags.get("config")
        return cls(component, environ, flags, config if isinstance(config, str) else None)

    def _read(self, path: str) -> dict[str, object]:
        try:
            with open(path, "rb") as file:
                document = tomllib.load(file)
        except OSError as error:
            raise ValueError(f"--config {path}: cannot read it: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"--config {path}: not valid TOML: {error}") from None
        loose = [key for key, value in document.items() if not isinstance(value, dict)]
        if loose:
            raise ValueError(f"--config {path}: settings go in a [{self.component}] table, "
                             f"found {loose[0]!r} outside any table")
        table = document.get(self.component)
        if table is None:
            found = ", ".join(f"[{name}]" for name in document) or "no table"
            raise ValueError(f"--config {path}: no [{self.component}] table (found {found})")
        return dict(table)

    def check_file_keys(self, classes: Iterable[type], skip: Iterable[str] = ()) -> None:
        """Raise ``ValueError`` for a key of the file's table that no field of ``classes`` has."""
        skipped = set(skip)
        known = {field.name for cls in classes for field, _ in _fields(cls)} - skipped
        for key in self._file:
            if key not in known:
                raise ValueError(
                    f"--config {self._path}: [{self.component}] has no setting {key!r}; "
                    f"known: {', '.join(sorted(known))}")

    def value(self, field: str, kind: type) -> tuple[bool, object]:
        """``(found, value)`` of one field from flags, else environment, else file."""
        flag = self._flags.get(field)
        if flag is not None:
            return True, flag
        name = env_name(self.component, field)
        raw = self._environ.get(name)
        if raw:
            try:
                return True, _from_text(kind, raw)
            except ValueError as error:
                raise ValueError(f"{name}={raw!r}: {error}") from None
        if field in self._file:
            value = self._file[field]
            try:
                return True, _from_toml(kind, value)
            except ValueError as error:
                raise ValueError(f"--config {self._path}: [{self.component}] {field} = "
                                 f"{value!r}: {error}") from None
        return False, None

    def build(self, cls: type[T], *, skip: Iterable[str] = (),
              required: Iterable[str] = ()) -> T:
        """The dataclass ``cls`` from the layers; its ``__post_init__`` checks the values.

        Args:
            cls: a frozen config dataclass.
            skip: fields left at their default whatever the layers say.
            required: fields that must be set (and not empty), besides those
                without a default.

        Raises:
            ValueError: a bad or missing value, naming the flag and variable.
        """
        skipped, needed = set(skip), set(required)
        values: dict[str, object] = {}
        for field, kind in _fields(cls):
            if field.name in skipped:
                continue
            found, value = self.value(field.name, kind)
            no_default = (field.default is dataclasses.MISSING
                          and field.default_factory is dataclasses.MISSING)
            if (not found or value == "") and (no_default or field.name in needed):
                raise ValueError(
                    f"{_flag(field.name)} (or {env_name(self.component, field.name)}) is "
                    f"required; a --config file may set it as {field.name} in its "
                    f"[{self.component}] table")
            if found:
                values[field.name] = value
        return cls(**values)


def _toml_value(value: object) -> str:
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def to_toml(component: str, *configs: object, skip: Iterable[str] = ()) -> str:
    """The settings of ``configs`` as the ``[component]`` table that ``--config`` reads back.

    Args:
        component: the table's name.
        configs: the component's config dataclass instances.
        skip: fields not to print (those ``add_arguments`` gave no flag).
    """
    skipped = set(skip)
    lines = [
        f"# folio {component} settings: defaults < this file (--config) < "
        f"{ENV_PREFIX}{component.upper()}_* < flags",
        f"[{component}]",
    ]
    for config in configs:
        for field in dataclasses.fields(config):  # type: ignore[arg-type]
            if field.name not in skipped:
                lines.append(f"{field.name} = {_toml_value(getattr(config, field.name))}")
    return "\n".join(lines) + "\n"
