"""ClientConfig: layered resolution (defaults < $FOLIO_ENDPOINT < arguments) and its checks."""

from __future__ import annotations

import dataclasses

import pytest

from folio import ClientConfig, InvalidArgumentError
from folio.config import DEFAULT_ENDPOINT, DEFAULT_TIMEOUT_S, ENDPOINT_ENV


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
