"""``folio kafka-user``: SCRAM users of the Kafka listener (add, delete, list).

It speaks the Kafka protocol to a broker's Kafka port, as ``kafka-configs
--alter --add-config SCRAM-SHA-256=...`` does: AlterUserScramCredentials
(key 51) and DescribeUserScramCredentials (key 50). The password never goes
on the wire: this command salts and hashes it (PBKDF2, ``--iterations``,
at least 4096) and sends the salted password, from which the broker keeps
StoredKey and ServerKey in the metadata store, seen by every broker of the
cluster. A SCRAM user's name is its role (``folio acl grant --role NAME``).

On a listener that authenticates, the command authenticates as a
super-user with SASL PLAIN and a token (``--sasl-token-file``), over TLS with
``--tls-ca`` (SASL_SSL). ``folio.cli`` loads ``kafka_user_command`` through
the ``folio.commands`` entry-point group (the SDK cannot import kio).
"""

from __future__ import annotations

import argparse
import getpass
import io
import os
import secrets
import socket
import ssl
import struct
import sys
from typing import Any

from broker.kafka.handlers.scram_users import ALTER_KEY, DESCRIBE_KEY, MECHANISMS
from broker.kafka.messages import (
    build,
    decode_entity,
    encode_entity,
    nested,
    request_class,
    response_class,
)
from broker.kafka.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, salted_password

__all__ = ["kafka_user_command"]

_NUMBERS = {name: number for number, name in MECHANISMS.items()}
_TIMEOUT_S = 30.0


class _Failure(Exception):
    """What the command prints as its error."""


class _KafkaClient:
    """One blocking Kafka connection: optional TLS, optional SASL PLAIN, request after request."""

    def __init__(self, args: argparse.Namespace) -> None:
        host, _, port = args.bootstrap_server.rpartition(":")
        if not host or not port.isdigit():
            raise _Failure(f"--bootstrap-server {args.bootstrap_server!r} is not host:port")
        try:
            sock: socket.socket = socket.create_connection((host.strip("[]"), int(port)),
                                                           timeout=_TIMEOUT_S)
            if args.tls_ca:
                context = ssl.create_default_context(cafile=args.tls_ca)
                if args.tls_cert:
                    context.load_cert_chain(args.tls_cert, args.tls_key)
                sock = context.wrap_socket(sock, server_hostname=host.strip("[]"))
        except (OSError, ssl.SSLError) as error:
            raise _Failure(f"cannot reach the Kafka port {args.bootstrap_server}: "
                           f"{error}") from None
        self._sock = sock
        self._correlation = 0
        if args.sasl_token_file:
            self._plain(_read_secret(args.sasl_token_file, "token file"))

    def call(self, api_key: int, version: int, request: Any) -> Any:
        self._correlation += 1
        cls = request_class(api_key, version)
        header_cls = cls.__header_schema__  # type: ignore[attr-defined]
        out = io.BytesIO()
        encode_entity(header_cls, header_cls(request_api_key=api_key, request_api_version=version,
                                             correlation_id=self._correlation,
                                             client_id="folio-kafka-user"), out)
        encode_entity(cls, request, out)
        body = out.getvalue()
        try:
            self._sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", self._read(4))
            data = self._read(size)
        except OSError as error:
            raise _Failure(f"the broker closed the connection ({error}): does the listener "
                           "need --sasl-token-file or --tls-ca?") from None
        response_cls = response_class(api_key, version)
        header_cls = response_cls.__header_schema__  # type: ignore[attr-defined]
        _header, used = decode_entity(header_cls, data, 0)
        response, _ = decode_entity(response_cls, data, used)
        return response

    def _read(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self._sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed")
            chunks.extend(chunk)
        return bytes(chunks)

    def _plain(self, token: str) -> None:
        handshake = self.call(17, 1, build(request_class(17, 1), mechanism="PLAIN"))
        if handshake.error_code.value != 0:
            raise _Failure(f"the listener does not serve SASL PLAIN (it serves "
                           f"{', '.join(handshake.mechanisms) or 'no SASL'})")
        answer = self.call(36, 1, build(request_class(36, 1),
                                        auth_bytes=b"\x00\x00" + token.encode()))
        if answer.error_code.value != 0:
            raise _Failure(f"SASL authentication failed: {answer.error_message}")

    def close(self) -> None:
        self._sock.close()


def _read_secret(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read().strip()
    except OSError as error:
        raise _Failure(f"cannot read {what} {path}: {error.strerror}") from None
    if not text:
        raise _Failure(f"{what} {path} is empty")
    return text


def _password(args: argparse.Namespace) -> str:
    if args.password_file:
        return _read_secret(args.password_file, "password file")
    from_env = os.environ.get("FOLIO_KAFKA_USER_PASSWORD", "")
    if from_env:
        return from_env
    if not sys.stdin.isatty():
        raise _Failure("give --password-file or FOLIO_KAFKA_USER_PASSWORD (no terminal to "
                       "ask on)")
    first = getpass.getpass(f"password for {args.user}: ")
    if first != getpass.getpass("again: "):
        raise _Failure("the passwords differ")
    return first


def _mechanisms(args: argparse.Namespace) -> list[str]:
    return [args.mechanism] if args.mechanism else sorted(_NUMBERS)


def _check(results: Any) -> None:
    failed = [f"{result.user}: {result.error_code.name.upper()} ({result.error_message})"
              for result in results if result.error_code.value != 0]
    if failed:
        raise _Failure("; ".join(failed))


def _add(client: _KafkaClient, args: argparse.Namespace) -> str:
    password = _password(args).encode()
    cls = request_class(ALTER_KEY, 0)
    upsert_cls = nested(cls, "ScramCredentialUpsertion")
    upserts = []
    for mechanism in _mechanisms(args):
        salt = secrets.token_bytes(32)
        upserts.append(build(upsert_cls, name=args.user, mechanism=_NUMBERS[mechanism],
                             iterations=args.iterations, salt=salt,
                             salted_password=salted_password(mechanism, password, salt,
                                                             args.iterations)))
    _check(client.call(ALTER_KEY, 0, build(cls, deletions=(), upsertions=tuple(upserts)))
           .results)
    return f"SCRAM user {args.user} set ({', '.join(_mechanisms(args))})"


def _delete(client: _KafkaClient, args: argparse.Namespace) -> str:
    cls = request_class(ALTER_KEY, 0)
    delete_cls = nested(cls, "ScramCredentialDeletion")
    deletions = tuple(build(delete_cls, name=args.user, mechanism=_NUMBERS[mechanism])
                      for mechanism in _mechanisms(args))
    if not args.mechanism:  # delete what exists: both may not
        described = client.call(DESCRIBE_KEY, 0, build(
            request_class(DESCRIBE_KEY, 0),
            users=(build(nested(request_class(DESCRIBE_KEY, 0), "UserName"), name=args.user),)))
        _check(described.results)
        have = {int(info.mechanism) for info in described.results[0].credential_infos}
        deletions = tuple(item for item in deletions if int(item.mechanism) in have)
    _check(client.call(ALTER_KEY, 0, build(cls, deletions=deletions, upsertions=())).results)
    return f"SCRAM user {args.user} deleted"


def _list(client: _KafkaClient, _args: argparse.Namespace) -> str:
    answer = client.call(DESCRIBE_KEY, 0, build(request_class(DESCRIBE_KEY, 0), users=None))
    if answer.error_code.value != 0:
        raise _Failure(f"{answer.error_code.name.upper()}: {answer.error_message}")
    lines = ["USER\tMECHANISM\tITERATIONS"]
    for result in answer.results:
        for info in result.credential_infos:
            lines.append(f"{result.user}\t{MECHANISMS.get(int(info.mechanism), '?')}\t"
                         f"{info.iterations}")
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    try:
        client = _KafkaClient(args)
        try:
            print(args.action(client, args))
        finally:
            client.close()
    except _Failure as error:
        print(f"folio kafka-user: error: {error}", file=sys.stderr)
        return 1
    return 0


def kafka_user_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio kafka-user``: SCRAM users of the Kafka listener."""
    parser = subparsers.add_parser(
        "kafka-user", help="add, delete and list SCRAM users of the Kafka listener",
        description="SCRAM-SHA-256/512 users for Kafka clients (sasl.mechanism SCRAM-*), "
        "kept salted and hashed in the metadata store so every broker knows them. A user's "
        "name is its role for permissions (folio acl grant --role NAME). Talks to a "
        "broker's Kafka port (AlterUserScramCredentials); on a listener that "
        "authenticates, give a super-user's token (--sasl-token-file). See docs/security.md.")
    commands = parser.add_subparsers(dest="kafka_user_command", metavar="COMMAND",
                                     required=True)
    for name, action, text in (("add", _add, "add a user or set its password"),
                               ("delete", _delete, "delete a user's credentials"),
                               ("list", _list, "list the users and their mechanisms")):
        command = commands.add_parser(name, help=text, description=text)
        command.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                             help="a broker's Kafka port")
        command.add_argument("--tls-ca", metavar="FILE",
                             help="PEM CA of the broker's certificate: connect with TLS "
                             "(SSL or SASL_SSL listeners)")
        command.add_argument("--tls-cert", metavar="FILE",
                             help="PEM client certificate (listeners that ask for one)")
        command.add_argument("--tls-key", metavar="FILE", help="its PEM private key")
        command.add_argument("--sasl-token-file", metavar="FILE",
                             help="file with a super-user's JWT: authenticate with SASL PLAIN "
                             "(SASL_PLAINTEXT or SASL_SSL listeners)")
        if name != "list":
            command.add_argument("--user", required=True, help="the user name (its role)")
            command.add_argument("--mechanism", choices=sorted(_NUMBERS), default=None,
                                 help="only this mechanism (default: both)")
        if name == "add":
            command.add_argument("--password-file", metavar="FILE",
                                 help="file holding the password (default: "
                                 "$FOLIO_KAFKA_USER_PASSWORD, else asked on the terminal)")
            command.add_argument("--iterations", type=int, default=8192,
                                 choices=range(MIN_ITERATIONS, MAX_ITERATIONS + 1),
                                 metavar=f"{MIN_ITERATIONS}..{MAX_ITERATIONS}",
                                 help="PBKDF2 iterations (default 8192)")
        command.set_defaults(func=_run, action=action)
