"""JWT tokens: HS256, RS256 and ES256; expiry; forgery; the verified-token cache."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ledger.security.interceptor import bearer_token
from ledger.security.tokens import (
    TokenError,
    TokenFile,
    TokenVerifier,
    create_token,
    load_signing_key,
    parse_duration_s,
)


def _pem_pair(tmp_path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
              name: str) -> tuple[Path, Path]:
    private = tmp_path / f"{name}.key"
    public = tmp_path / f"{name}.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def test_hs256_round_trip_forgery_and_expiry(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret-s3cret-s3cret-s3cret-s3cret!!\n")
    key, algorithm = load_signing_key(secret_file=str(secret))
    assert algorithm == "HS256"
    now = [1_000_000.0]
    verifier = TokenVerifier.from_files(secret_file=str(secret))
    verifier._clock = lambda: now[0]
    token = create_token("app", key, algorithm, expiry_s=60, clock=lambda: now[0])
    assert verifier.verify(token).role == "app"
    forged = create_token("app", b"other-other-other-other-other-other", "HS256")
    with pytest.raises(TokenError, match="signature"):
        verifier.verify(forged)
    with pytest.raises(TokenError, match="not a valid JWT"):
        verifier.verify("abc")
    now[0] += 3600  # past exp: refused although cached
    with pytest.raises(TokenError, match="expired"):
        verifier.verify(token)


@pytest.mark.parametrize("kind", ["rsa", "ec"])
def test_public_key_tokens(tmp_path: Path, kind: str) -> None:
    key = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "rsa"
           else ec.generate_private_key(ec.SECP256R1()))
    private, public = _pem_pair(tmp_path, key, kind)
    signing, algorithm = load_signing_key(private_key_file=str(private))
    assert algorithm == ("RS256" if kind == "rsa" else "ES256")
    verifier = TokenVerifier.from_files(public_key_file=str(public))
    assert verifier.verify(create_token("ops", signing, algorithm)).role == "ops"
    # A token signed with the HMAC of the public key (algorithm confusion) is refused.
    with pytest.raises(TokenError, match="algorithm"):
        verifier.verify(_hs256_by_hand({"sub": "ops"}, public.read_bytes()))


def _hs256_by_hand(claims: dict[str, object], key: bytes) -> str:
    def part(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    signed = part(b'{"alg":"HS256","typ":"JWT"}') + b"." + part(json.dumps(claims).encode())
    signature = hmac.new(key, signed, hashlib.sha256).digest()
    return (signed + b"." + part(signature)).decode()


def test_key_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of"):
        TokenVerifier.from_files()
    with pytest.raises(ValueError, match="cannot read"):
        TokenVerifier.from_files(secret_file=str(tmp_path / "missing"))
    garbage = tmp_path / "garbage"
    garbage.write_text("not a key")
    with pytest.raises(ValueError, match="no PEM public key"):
        TokenVerifier.from_files(public_key_file=str(garbage))


def test_durations_bearer_metadata_and_token_files(tmp_path: Path) -> None:
    assert [parse_duration_s(text) for text in ("30s", "15m", "1h", "7d", "90")] == \
        [30, 900, 3600, 604800, 90]
    with pytest.raises(ValueError):
        parse_duration_s("soon")
    assert bearer_token([("authorization", "Bearer abc")]) == "abc"
    assert bearer_token([("authorization", "Basic abc")]) == ""
    assert bearer_token([("x", "y")]) is None
    path = tmp_path / "token"
    path.write_text("first\n")
    now = [0.0]
    source = TokenFile(str(path), clock=lambda: now[0])
    assert source() == "first"
    path.write_text("second-token\n")
    assert source() == "first"  # checked at most once a second
    now[0] += 2
    assert source() == "second-token"


def test_a_new_secret_in_the_file_replaces_the_old(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("old-secret-old-secret-old-secret-!!")
    verifier = TokenVerifier.from_files(secret_file=str(secret))
    old = create_token("app", b"old-secret-old-secret-old-secret-!!", "HS256")
    assert verifier.verify(old).role == "app"
    secret.write_text("new-secret-new-secret-new-secret-!!!")
    verifier.monotonic = lambda: 1e12  # the once-a-second check is due
    with pytest.raises(TokenError, match="signature"):
        verifier.verify(old)  # the cache was dropped with the old key
    new = create_token("app", b"new-secret-new-secret-new-secret-!!!", "HS256")
    assert verifier.verify(new).role == "app"
