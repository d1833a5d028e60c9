"""Serializers: round trips, accepted types, compact JSON."""

from __future__ import annotations

from typing import Any

import pytest

import folio
from folio.serializers import BytesSerializer, JsonSerializer, Serializer, StringSerializer


def test_bytes_serializer() -> None:
    serializer = BytesSerializer()
    payload = b"\x00\xffabc"
    assert serializer.serialize(payload) is payload
    assert serializer.serialize(bytearray(b"ab")) == b"ab"
    assert type(serializer.serialize(bytearray(b"ab"))) is bytes
    assert serializer.serialize(memoryview(b"xyz")[1:]) == b"yz"
    assert serializer.deserialize(payload) is payload
    with pytest.raises(TypeError, match="str"):
        serializer.serialize("text")  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "plain", "héllo", "日本", "emoji \U0001f600"])
def test_string_serializer_round_trips(text: str) -> None:
    serializer = StringSerializer()
    assert serializer.serialize(text) == text.encode("utf-8")
    assert serializer.deserialize(serializer.serialize(text)) == text


def test_string_serializer_encodings() -> None:
    latin = StringSerializer("latin-1")
    assert latin.serialize("é") == b"\xe9"
    assert latin.deserialize(b"\xe9") == "é"
    with pytest.raises(LookupError):
        StringSerializer("no-such-codec")
    with pytest.raises(UnicodeDecodeError):
        StringSerializer().deserialize(b"\xff")


@pytest.mark.parametrize("value", [None, 1, 2.5, "s", [1, "a"], {"a": {"b": [True, None]}},
                                   {"ü": "日本"}])
def test_json_serializer_round_trips(value: Any) -> None:
    serializer = JsonSerializer()
    assert serializer.deserialize(serializer.serialize(value)) == value


def test_json_serializer_is_compact_utf8() -> None:
    assert JsonSerializer().serialize({"a": [1, 2], "b": "é"}) == \
        '{"a":[1,2],"b":"é"}'.encode()
    with pytest.raises(TypeError):
        JsonSerializer().serialize(object())


def test_serializers_satisfy_the_protocol() -> None:
    serializers: list[Serializer[Any]] = [BytesSerializer(), StringSerializer(),
                                          JsonSerializer()]
    assert [repr(s) for s in serializers] == \
        ["BytesSerializer()", "StringSerializer('utf-8')", "JsonSerializer()"]
    assert folio.Serializer is Serializer
