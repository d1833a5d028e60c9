"""The SDK's ``[client]`` resolver and the servers' ``ledger.settings`` agree.

``folio/config.py`` cannot import ``ledger.settings`` (the SDK imports only
itself), so it keeps a small resolver of its own (CONTRIBUTING.md, "Settings").
This test keeps the two consistent: fed the same file, environment and flags,
``ClientConfig.load`` and ``ledger.settings.Layers`` (run on the same
``ClientConfig`` dataclass, table ``client``) give the same values, for every
combination of layers that set a field, and refuse the same bad input with the
same message.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from folio import ClientConfig
from folio.config import TABLE, env_name
from folio.errors import InvalidArgumentError
from ledger.settings import Layers

# One value per (field, layer): a result names the layer it came from.
_VALUES: dict[str, dict[str, object]] = {
    "endpoint": {"file": "file-host:1", "env": "env-host:2", "flag": "flag-host:3"},
    "timeout_s": {"file": 11.5, "env": 12.5, "flag": 13.5},
    "connect_timeout_s": {"file": 2.5, "env": 3.5, "flag": 4.5},
    "max_connections_per_endpoint": {"file": 5, "env": 6, "flag": 7},
    "tls_ca": {"file": "file-ca.pem", "env": "env-ca.pem", "flag": "flag-ca.pem"},
    "tls_cert": {"file": "file-cert.pem", "env": "env-cert.pem", "flag": "flag-cert.pem"},
    "tls_key": {"file": "file-key.pem", "env": "env-key.pem", "flag": "flag-key.pem"},
    "tls_server_name": {"file": "file.example", "env": "env.example", "flag": "flag.example"},
    "token_file": {"file": "file-token", "env": "env-token", "flag": "flag-token"},
}
#: Fields left out of the layer comparison, with why (each still goes through
#: the same code as a field above of its type).
_LEFT_OUT = {
    "token": "exclusive with token_file (both set is refused), a str like token_file",
}
_LAYERS = ("file", "env", "flag")


def _toml(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _server_side(path: Path | None, environ: dict[str, str],
                 flags: dict[str, object]) -> ClientConfig:
    layers = Layers(TABLE, environ, flags, str(path) if path else None)
    layers.check_file_keys([ClientConfig])
    return layers.build(ClientConfig)


def _combinations() -> list[tuple[str, ...]]:
    return [combo for size in range(len(_LAYERS) + 1)
            for combo in itertools.combinations(_LAYERS, size)]


@pytest.mark.parametrize("layers", _combinations(), ids=lambda combo: "+".join(combo) or "none")
def test_same_precedence_for_every_combination_of_layers(tmp_path: Path,
                                                         layers: tuple[str, ...]) -> None:
    # Each field is set in the layers given; the other fields in none (defaults).
    path = tmp_path / "folio.toml"
    lines = [f"[{TABLE}]"]
    environ: dict[str, str] = {}
    flags: dict[str, object] = dict.fromkeys(_VALUES)
    for name, by_layer in _VALUES.items():
        if "file" in layers:
            lines.append(f"{name} = {_toml(by_layer['file'])}")
        if "env" in layers:
            environ[env_name(name)] = str(by_layer["env"])
        if "flag" in layers:
            flags[name] = by_layer["flag"]
    path.write_text("\n".join(lines) + "\n[broker]\nport = 1\n")  # another table: ignored

    sdk = ClientConfig.load(str(path), environ=environ, **flags)
    server = _server_side(path, environ, flags)

    assert sdk == server
    winner = layers[-1] if layers else None  # _LAYERS is in precedence order
    for name, by_layer in _VALUES.items():
        expected = (by_layer[winner] if winner is not None
                    else getattr(ClientConfig(), name))
        assert getattr(sdk, name) == expected, (name, layers)


def test_the_config_file_variable_names_the_file_for_both(tmp_path: Path) -> None:
    path = tmp_path / "folio.toml"
    path.write_text(f"[{TABLE}]\ntimeout_s = 4\n")
    environ = {env_name("config"): str(path)}
    flags: dict[str, object] = dict.fromkeys(_VALUES)
    sdk = ClientConfig.load(None, environ=environ, **flags)
    assert sdk == _server_side(None, environ, flags)
    assert sdk.timeout_s == 4.0


def test_print_config_reads_back_through_both(tmp_path: Path) -> None:
    config = ClientConfig("printed-host:9", 2.25, 3)
    path = tmp_path / "printed.toml"
    path.write_text(config.to_toml())
    flags: dict[str, object] = dict.fromkeys(_VALUES)
    assert ClientConfig.load(str(path), environ={}) == config
    assert _server_side(path, {}, flags) == config


@pytest.mark.parametrize(("text", "environ"), [
    (f"[{TABLE}]\nretries = 3\n", {}),                       # an unknown key
    (f"[{TABLE}]\ntimeout_s = \"soon\"\n", {}),              # the wrong TOML type
    (f"[{TABLE}]\nmax_connections_per_endpoint = 1.5\n", {}),
    ("[broker]\nport = 1\n", {}),                            # no [client] table
    ("timeout_s = 3\n", {}),                                 # a key outside any table
    ("[client\n", {}),                                       # not TOML
    (f"[{TABLE}]\n", {env_name("timeout_s"): "soon"}),       # a bad variable
], ids=["unknown-key", "string-for-number", "float-for-int", "no-table", "loose-key",
        "not-toml", "bad-variable"])
def test_same_refusal_and_message(tmp_path: Path, text: str, environ: dict[str, str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    flags: dict[str, object] = dict.fromkeys(_VALUES)
    with pytest.raises(InvalidArgumentError) as sdk_error:
        ClientConfig.load(str(path), environ=environ)
    with pytest.raises(ValueError) as server_error:
        _server_side(path, environ, flags)
    assert str(sdk_error.value) == str(server_error.value)


def test_the_fields_compared_are_all_of_client_config() -> None:
    # A new ClientConfig field must be added to _VALUES (and so to this comparison).
    assert {field.name for field in dataclasses.fields(ClientConfig)} \
        == set(_VALUES) | set(_LEFT_OUT)
