"""The SDK's TLS and token settings: config keys, the FOLIO_TOKEN alias, token files."""

from __future__ import annotations

from pathlib import Path

import pytest

import folio
from folio.config import ClientConfig
from folio.errors import InvalidArgumentError
from folio.security import TokenSource


def test_token_and_tls_from_the_environment_and_never_printed(tmp_path: Path) -> None:
    config = ClientConfig.load(None, {"FOLIO_TOKEN": "abc.def.ghi",
                                      "FOLIO_CLIENT_TLS_CA": "ca.pem"})
    assert config.token == "abc.def.ghi" and config.tls() == folio.TLS(ca="ca.pem")
    assert "abc.def.ghi" not in config.to_toml()
    assert "token is set" in config.to_toml()
    specific = ClientConfig.load(None, {"FOLIO_TOKEN": "general", "FOLIO_CLIENT_TOKEN": "mine"})
    assert specific.token == "mine"
    assert ClientConfig().tls() is None and ClientConfig().security().tls is None


def test_bad_combinations_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="together"):
        folio.TLS(cert="c.pem")
    with pytest.raises(InvalidArgumentError, match="not both"):
        ClientConfig(token="t", token_file="f")
    with pytest.raises(InvalidArgumentError, match="cannot read the TLS CA file"):
        ClientConfig(tls_ca=str(tmp_path / "missing.pem")).security()
    with pytest.raises(InvalidArgumentError, match="cannot read the token file"):
        TokenSource(token_file=str(tmp_path / "missing"))


def test_a_token_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    now = [0.0]
    source = TokenSource(token_file=str(path), clock=lambda: now[0])
    assert source.metadata() == (("authorization", "Bearer one"),)
    path.write_text("two-two\n")
    now[0] += 2
    assert source() == "two-two"
    path.write_text("")  # being rewritten: the last good token stays
    now[0] += 2
    assert source() == "two-two"


def test_spark_options_carry_tls_and_token() -> None:
    from folio.spark._options import ReadOptions, WriteOptions  # noqa: PLC0415

    options = {"topic": "t", "endpoint": "h:1", "tlsca": "ca.pem", "tokenfile": "app.jwt"}
    read = ReadOptions.parse(options)
    assert read.client == ClientConfig(endpoint="h:1", tls_ca="ca.pem", token_file="app.jwt")
    assert WriteOptions.parse(options).client == read.client
    assert ReadOptions.parse({"topic": "t", "endpoint": "h:1"}).client == ClientConfig("h:1")
