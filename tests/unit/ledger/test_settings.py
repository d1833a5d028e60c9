"""ledger.settings: defaults < TOML file < environment < flags, and TOML that reads back."""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pytest

from ledger.settings import Layers, add_arguments, env_name, to_toml


class Mode(StrEnum):
    FAST = "fast"
    SAFE = "safe"


@dataclass(frozen=True)
class Demo:
    name: str
    size_bytes: int = 10
    ratio: float = 0.5
    verbose: bool = False
    mode: Mode = Mode.SAFE

    def __post_init__(self) -> None:
        if self.size_bytes <= 0:
            raise ValueError(f"size_bytes must be positive, got {self.size_bytes}")


@dataclass(frozen=True)
class Extra:
    peers: str = ""


HELP = {"name": "a name", "size_bytes": "a size"}


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser, [Demo, Extra], component="demo", help=HELP)
    return parser.parse_args(argv)


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "demo.toml"
    path.write_text(text)
    return str(path)


def _build(argv: list[str], environ: dict[str, str] | None = None) -> tuple[Demo, Extra]:
    layers = Layers.from_args("demo", _parse(argv), environ or {})
    layers.check_file_keys([Demo, Extra])
    return layers.build(Demo), layers.build(Extra, required=["peers"])


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    config = _write(tmp_path, '[demo]\nname = "file"\nsize_bytes = 20\nratio = 2\n'
                              'verbose = true\npeers = "a:1"\n[other]\nignored = 1\n')
    demo, extra = _build(["--config", config, "--size-bytes", "40"],
                         {"FOLIO_DEMO_SIZE_BYTES": "30", "FOLIO_DEMO_MODE": "fast",
                          "FOLIO_DEMO_NAME": ""})
    assert demo == Demo(name="file", size_bytes=40, ratio=2.0, verbose=True, mode=Mode.FAST)
    assert extra == Extra(peers="a:1")
    assert isinstance(demo.ratio, float)
    assert _build(["--name", "n", "--peers", "p:1", "--no-verbose"],
                  {"FOLIO_DEMO_VERBOSE": "yes"})[0].verbose is False
    assert _build(["--name", "n", "--peers", "p:1"], {"FOLIO_DEMO_VERBOSE": "ON"})[0].verbose


def test_the_config_file_may_come_from_the_environment(tmp_path: Path) -> None:
    config = _write(tmp_path, '[demo]\nname = "from-env-file"\npeers = "x:1"\n')
    demo, _ = _build([], {env_name("demo", "config"): config})
    assert demo.name == "from-env-file"


def test_print_config_reads_back_unchanged(tmp_path: Path) -> None:
    demo = Demo(name='odd "name"\twith\x7f控制', size_bytes=7, ratio=1e-5, verbose=True,
                mode=Mode.FAST)
    extra = Extra(peers="h:1,h:2")
    printed = to_toml("demo", demo, extra)
    assert tomllib.loads(printed)["demo"]["mode"] == "fast"
    config = _write(tmp_path, printed)
    assert _build(["--config", config], {}) == (demo, extra)
    assert to_toml("demo", *_build(["--config", config], {})) == printed


@pytest.mark.parametrize(("text", "argv", "environ", "message"), [
    (None, ["--peers", "p:1"], {}, "--name (or FOLIO_DEMO_NAME) is required"),
    (None, ["--name", "n"], {}, "--peers (or FOLIO_DEMO_PEERS) is required"),
    (None, ["--name", "n", "--peers", "p"], {"FOLIO_DEMO_SIZE_BYTES": "ten"},
     "FOLIO_DEMO_SIZE_BYTES='ten': invalid literal"),
    (None, ["--name", "n", "--peers", "p"], {"FOLIO_DEMO_VERBOSE": "maybe"},
     "FOLIO_DEMO_VERBOSE='maybe': expected true or false"),
    (None, ["--name", "n", "--peers", "p"], {"FOLIO_DEMO_MODE": "slow"},
     "FOLIO_DEMO_MODE='slow': 'slow' is not a valid Mode"),
    (None, ["--name", "n", "--peers", "p", "--size-bytes", "0"], {},
     "size_bytes must be positive, got 0"),
    ('[demo]\nname = "n"\npeers = "p"\nsize_bytes = "10"\n', [], {},
     "[demo] size_bytes = '10': expected an integer"),
    ('[demo]\nname = "n"\npeers = "p"\nsize_bytes = true\n', [], {},
     "[demo] size_bytes = True: expected an integer"),
    ('[demo]\nname = "n"\npeers = "p"\nsize_byte = 1\n', [], {},
     "[demo] has no setting 'size_byte'; known: mode, name, peers, ratio, size_bytes"),
    ('name = "n"\n', [], {}, "settings go in a [demo] table, found 'name' outside"),
    ('[broker]\nport = 1\n', [], {}, "no [demo] table (found [broker])"),
    ("[demo\n", [], {}, "not valid TOML"),
], ids=["missing field", "missing required", "bad env int", "bad env bool", "bad env enum",
        "refused by __post_init__", "file string for int", "file bool for int",
        "unknown file key", "no table", "other table only", "not toml"])
def test_bad_settings_name_their_source(tmp_path: Path, text: str | None, argv: list[str],
                                        environ: dict[str, str], message: str) -> None:
    if text is not None:
        argv = ["--config", _write(tmp_path, text), *argv]
    with pytest.raises(ValueError) as raised:
        _build(argv, environ)
    assert message in str(raised.value)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read it"):
        _build(["--config", str(tmp_path / "missing.toml")])


def test_flags_are_added_with_their_help() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, [Demo], component="demo", help=HELP, skip=["ratio"])
    text = parser.format_help()
    for flag in ("--name", "--size-bytes", "--verbose", "--mode", "--config",
                 "--print-config", "FOLIO_DEMO_CONFIG", "a size"):
        assert flag in text
    assert "--ratio" not in text
    assert parser.parse_args([]).name is None
