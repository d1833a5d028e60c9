"""``folio token``: make the JWTs that Folio servers verify (operators' tool).

``folio.cli`` loads ``token_command`` through the ``folio.commands``
entry-point group (the SDK cannot import the servers' token code).

- ``folio token create-secret-key --output FILE``: a new random HS256
  secret (32 bytes, base64), the file readable by its owner only.
- ``folio token create --secret-file F --subject ROLE [--expiry 1h]
  [--output FILE]``: a token for ROLE signed with the secret (or
  ``--private-key-file`` for RS256 or ES256), printed on stdout, or written to
  FILE readable by its owner only (mode 600, replaced atomically, so a client's
  ``--token-file`` never reads half a token). A token is a password: printed
  to a redirected stdout (``> admin.jwt``) it lands in a file of the shell's
  umask (often 644), so the command warns and names ``--output``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import secrets
import stat
import sys
import tempfile

from ledger.security.tokens import create_token, load_signing_key, parse_duration_s

__all__ = ["token_command"]

#: Bytes of a new HS256 secret (256 bits, as HS256 wants at least).
SECRET_BYTES = 32


def _fail(message: str) -> int:
    print(f"folio token: error: {message}", file=sys.stderr)
    return 1


def _create(args: argparse.Namespace) -> int:
    try:
        key, algorithm = load_signing_key(args.secret_file or "", args.private_key_file or "")
        expiry_s = parse_duration_s(args.expiry) if args.expiry else None
        token = create_token(args.subject, key, algorithm, expiry_s=expiry_s)
    except ValueError as error:
        return _fail(str(error))
    if args.output:
        try:
            _write_private(args.output, token.encode("ascii") + b"\n")
        except OSError as error:
            return _fail(f"cannot write {args.output}: {error.strerror}")
        print(f"wrote a token for {args.subject!r} to {args.output} (mode 600)",
              file=sys.stderr)
        return 0
    _warn_if_stdout_is_shared_file()
    print(token)
    return 0


def _write_private(path: str, data: bytes) -> None:
    """Writes ``data`` to ``path``, mode 600, replacing any file there atomically."""
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".folio-token-")
    try:
        with os.fdopen(descriptor, "wb") as file:  # mkstemp makes it mode 600
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _warn_if_stdout_is_shared_file() -> None:
    """A token redirected into a file others may read gets a warning naming ``--output``."""
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError):
        return
    if stat.S_ISREG(mode) and mode & 0o077:
        print(f"folio token: warning: stdout is a file readable by others (mode "
              f"{stat.S_IMODE(mode):o}): the token is a password; use --output FILE "
              f"(written mode 600) or chmod 600 it", file=sys.stderr)


def _create_secret(args: argparse.Namespace) -> int:
    secret = base64.b64encode(secrets.token_bytes(SECRET_BYTES)) + b"\n"
    try:
        descriptor = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _fail(f"{args.output} exists; not overwriting a key")
    except OSError as error:
        return _fail(f"cannot create {args.output}: {error.strerror}")
    with os.fdopen(descriptor, "wb") as file:
        file.write(secret)
    print(f"wrote a new HS256 secret to {args.output} (mode 600)", file=sys.stderr)
    return 0


def token_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio token``: create secrets and tokens for token authentication."""
    parser = subparsers.add_parser(
        "token", help="create JWT tokens (and HS256 secrets) for token authentication",
        description="Tokens are JWTs whose 'sub' claim is the role permissions are granted "
        "to (folio acl grant). Servers verify them with --auth-token-secret-file (HS256) or "
        "--auth-token-public-key-file (RS256/ES256). See docs/security.md.")
    commands = parser.add_subparsers(dest="token_command", metavar="SUBCOMMAND", required=True)
    create = commands.add_parser(
        "create", help="print a new token for a role",
        description="Print a signed JWT for --subject on stdout (or write it to --output "
        "FILE, mode 600: a token is a password). Give the HS256 secret (--secret-file) or an "
        "RSA/EC private key (--private-key-file, RS256/ES256).")
    keys = create.add_mutually_exclusive_group(required=True)
    keys.add_argument("--secret-file", metavar="FILE",
                      help="HS256 secret, the file the servers' --auth-token-secret-file names")
    keys.add_argument("--private-key-file", metavar="FILE",
                      help="PEM RSA (RS256) or EC P-256 (ES256) private key; the servers hold "
                      "its public key (--auth-token-public-key-file)")
    create.add_argument("--subject", "--role", dest="subject", required=True, metavar="ROLE",
                        help="the role the token proves (its 'sub' claim)")
    create.add_argument("--expiry", metavar="DURATION", default=None,
                        help="lifetime, e.g. 30m, 1h, 7d, 1y (default: no expiry)")
    create.add_argument("--output", metavar="FILE", default=None,
                        help="write the token to FILE, readable by its owner only (mode 600; "
                        "replaces FILE atomically) instead of printing it")
    create.set_defaults(func=_create)
    secret = commands.add_parser(
        "create-secret-key", help="write a new random HS256 secret to a file",
        description="Write 32 random bytes (base64) to --output, mode 600; refuses to "
        "overwrite an existing file.")
    secret.add_argument("--output", required=True, metavar="FILE", help="the file to create")
    secret.set_defaults(func=_create_secret)
