"""ClientConfig: its checks, ``resolve`` (defaults < environment < arguments) and ``load``.

``load`` layers defaults < the [client] table of a TOML file < FOLIO_CLIENT_*
($FOLIO_ENDPOINT as a lower alias) < given values; ``to_toml`` reads back.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import folio
from folio import ClientConfig, InvalidArgumentError
from folio.config import CONFIG_ENV, DEFAULT_ENDPOINT, DEFAULT_TIMEOUT_S, ENDPOINT_ENV


def test_defaults_without_environment() -> None:
    config = ClientConfig.resolve(environ={})
    assert config == ClientConfig(DEFAULT_ENDPOINT, DEFAULT_TIMEOUT_S, 2)


def test_environment_over_default_argument_over_environment() -> None:
    env = {ENDPOINT_ENV: "broker-a:7070"}
    assert ClientConfig.resolve(environ=env).endpoint == "broker-a:7070"
    assert ClientConfig.resolve("broker-b:7070", environ=env).endpoint == "broker-b:7070"
    assert ClientConfig.resolve(environ={ENDPOINT_ENV: ""}).endpoint == DEFAULT_ENDPOINT


@pytest.mark.parametrize(("changes", "message"), [
    ({"timeout_s": 0}, "timeout_s must be > 0, not 0"),
    ({"timeout_s": -1.5}, "timeout_s must be > 0, not -1.5"),
    ({"max_connections_per_endpoint": 0}, "max_connections_per_endpoint must be >= 1, not 0"),
    ({"endpoint": ""}, "endpoint must not be empty"),
])
def test_bad_values_are_refused_naming_the_field(changes: dict[str, object],
                                                 message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        ClientConfig(**changes)  # type: ignore[arg-type]


def test_frozen() -> None:
    config = ClientConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.timeout_s = 1.0  # type: ignore[misc]


# ClientConfig.load: defaults < [client] of a TOML file < FOLIO_CLIENT_* < given.

def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "folio.toml"
    path.write_text(text)
    return str(path)


def test_load_layers_file_then_environment_then_given(tmp_path: Path) -> None:
    path = _write(tmp_path, '[client]\nendpoint = "file:1"\ntimeout_s = 5\n'
                            'max_connections_per_endpoint = 4\n')
    assert ClientConfig.load(environ={}) == ClientConfig()
    assert ClientConfig.load(path, environ={}) == ClientConfig("file:1", 5.0, 4)
    env = {"FOLIO_CLIENT_TIMEOUT_S": "7.5", "FOLIO_CLIENT_ENDPOINT": "env:2"}
    assert ClientConfig.load(path, env) == ClientConfig("env:2", 7.5, 4)
    assert ClientConfig.load(path, env, endpoint="flag:3", timeout_s=None) == ClientConfig(
        "flag:3", 7.5, 4)
    # The file may also come from $FOLIO_CLIENT_CONFIG; --config wins over it.
    assert ClientConfig.load(environ={CONFIG_ENV: path}).endpoint == "file:1"
    other = tmp_path / "other.toml"
    other.write_text('[client]\nendpoint = "other:9"\n')
    assert ClientConfig.load(str(other), {CONFIG_ENV: path}).endpoint == "other:9"


def test_folio_endpoint_is_an_alias_below_folio_client_endpoint(tmp_path: Path) -> None:
    path = _write(tmp_path, '[client]\nendpoint = "file:1"\n')
    assert ClientConfig.load(path, {ENDPOINT_ENV: "old:2"}).endpoint == "old:2"
    both = {ENDPOINT_ENV: "old:2", "FOLIO_CLIENT_ENDPOINT": "new:3"}
    assert ClientConfig.load(path, both).endpoint == "new:3"
    assert ClientConfig.resolve(environ=both).endpoint == "new:3"
    # An empty variable counts as unset.
    assert ClientConfig.load(path, {"FOLIO_CLIENT_ENDPOINT": ""}).endpoint == "file:1"


def test_other_tables_are_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, '[broker]\nport = 7070\nwhatever = 1\n[bookie]\nport = 3181\n'
                            '[client]\nendpoint = "b:7070"\n')
    assert ClientConfig.load(path, {}).endpoint == "b:7070"


@pytest.mark.parametrize(("text", "environ", "message"), [
    ('[client]\nendpont = "x:1"\n', {},
     r"--config .*folio.toml: \[client\] has no setting 'endpont'; known: "
     r"connect_timeout_s, endpoint, "),
    ('[client]\ntimeout_s = "fast"\n', {},
     r"--config .*folio.toml: \[client\] timeout_s = 'fast': expected a number"),
    ('[client]\nmax_connections_per_endpoint = true\n', {},
     r"\[client\] max_connections_per_endpoint = True: expected an integer"),
    ('[client]\ntimeout_s = 0\n', {}, "timeout_s must be > 0, not 0.0"),
    ('[broker]\nport = 1\n', {}, r"no \[client\] table \(found \[broker\]\)"),
    ('endpoint = "x:1"\n', {}, r"settings go in a \[client\] table, found 'endpoint'"),
    ('[client\n', {}, "not valid TOML"),
    ('[client]\n', {"FOLIO_CLIENT_MAX_CONNECTIONS_PER_ENDPOINT": "many"},
     "FOLIO_CLIENT_MAX_CONNECTIONS_PER_ENDPOINT='many': invalid literal"),
])
def test_load_refuses_bad_files_and_values_naming_the_source(
        tmp_path: Path, text: str, environ: dict[str, str], message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InvalidArgumentError, match=message):
        ClientConfig.load(path, environ)


def test_load_refuses_a_missing_file_and_unknown_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"nope\.toml: cannot read it"):
        ClientConfig.load(str(tmp_path / "nope.toml"), {})
    with pytest.raises(InvalidArgumentError, match="has no setting 'timeout'"):
        ClientConfig.load(environ={}, timeout=3)


@pytest.mark.parametrize("config", [
    ClientConfig(),
    ClientConfig('b-1:7070,b-2:7070 "quoted" \\ \x7f é', 0.25, 9),
])
def test_to_toml_reads_back_unchanged(tmp_path: Path, config: ClientConfig) -> None:
    text = config.to_toml()
    assert "[client]\n" in text
    assert ClientConfig.load(_write(tmp_path, text), {}) == config


def test_client_takes_a_config(tmp_path: Path) -> None:
    config = ClientConfig.load(_write(tmp_path, '[client]\nendpoint = "localhost:1"\n'
                                                'timeout_s = 4\n'), {})
    # The client connects lazily: no broker is needed to see its settings.
    with folio.Client(config=config) as client:
        assert (client.config, client.endpoint, client.timeout_s) == (config, "localhost:1", 4.0)
    with folio.Client.from_config(config) as client:
        assert client.config == config
    with pytest.raises(InvalidArgumentError, match=r"either endpoint .* or config"):
        folio.Client("localhost:2", config=config)


def test_an_endpoint_list_from_the_environment_makes_a_client_of_every_endpoint() -> None:
    config = ClientConfig.resolve(environ={"FOLIO_ENDPOINT": " localhost:1, localhost:2 ,"})
    assert config.endpoint == " localhost:1, localhost:2 ,"
    # Lazy: nothing is sent before the first call, so no broker is needed here.
    with folio.Client(config=config) as client:
        assert client.endpoints == ("localhost:1", "localhost:2")
        assert client.admin_endpoint == "localhost:1"
    with pytest.raises(InvalidArgumentError, match="names no broker"):
        folio.Client(" , ")
