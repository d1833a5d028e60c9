"""``folio acl``: grant, revoke and list permissions (the Admin permission RPCs).

``folio acl grant --role app --topic 'orders.*' --actions produce,consume``
adds permissions; ``revoke`` takes them away; ``list`` shows the grants
(a super-user's call). The caller needs admin on what it grants, or to be a
super-user (docs/security.md).
"""

from __future__ import annotations

import argparse
import json
import sys

import folio
from folio.acl import ACTIONS, PermissionGrant
from folio.cli._common import add_endpoint_option, run_with_client

__all__ = ["register"]


def _actions(text: str) -> list[str]:
    actions = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [action for action in actions if action not in ACTIONS]
    if unknown or not actions:
        raise argparse.ArgumentTypeError(
            f"actions are a comma-separated list of {', '.join(ACTIONS)}; got {text!r}")
    return actions


def _resource(args: argparse.Namespace) -> tuple[str, str]:
    return ("group", args.group) if args.group else ("topic", args.topic)


def _show(grant: PermissionGrant) -> str:
    return f"{grant.role}\t{grant.kind}\t{grant.resource}\t{','.join(grant.actions)}"


def _grant(args: argparse.Namespace) -> int:
    kind, resource = _resource(args)

    def body(client: folio.Client) -> int:
        merged = client.grant_permission(args.role, resource, args.actions,
                                         kind=kind)  # type: ignore[arg-type]
        print(f"granted: {_show(merged)}")
        return 0

    return run_with_client("folio acl grant", args, body)


def _revoke(args: argparse.Namespace) -> int:
    kind, resource = _resource(args)

    def body(client: folio.Client) -> int:
        client.revoke_permission(args.role, resource, args.actions,
                                 kind=kind)  # type: ignore[arg-type]
        print(f"revoked {','.join(args.actions)} on {kind} {resource} from {args.role}")
        return 0

    return run_with_client("folio acl revoke", args, body)


def _list(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        grants = client.list_permissions(args.role)
        if args.json:
            json.dump([{"role": g.role, "kind": g.kind, "resource": g.resource,
                        "actions": list(g.actions)} for g in grants], sys.stdout, indent=2)
            print()
            return 0
        for grant in grants:
            print(_show(grant))
        return 0

    return run_with_client("folio acl list", args, body)


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--role", required=True, help="the role (a token's 'sub' claim)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="TOPIC",
                       help="a topic name, a prefix 'orders.*', or '*' (quote it in a shell)")
    which.add_argument("--group", metavar="GROUP",
                       help="a reader group name, a prefix 'etl.*', or '*'")
    parser.add_argument("--actions", required=True, type=_actions, metavar="A,B",
                        help=f"comma-separated: {', '.join(ACTIONS)}")
    add_endpoint_option(parser)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio acl`` and its sub-commands."""
    parser = subparsers.add_parser(
        "acl", help="grant, revoke and list permissions on topics and reader groups",
        description="Permissions of roles (the 'sub' claim of their tokens): produce, consume "
        "and admin on a topic or reader group, named exactly or by prefix ('orders.*'). "
        "Enforced when the broker runs with token authentication; see docs/security.md.")
    commands = parser.add_subparsers(dest="acl_command", metavar="COMMAND", required=True)
    grant = commands.add_parser("grant", help="give a role actions on a topic or group",
                                description="Add actions to a role's grant on a resource "
                                "(kept with what it had). Needs admin on the resource or a "
                                "super-user.")
    _target(grant)
    grant.set_defaults(func=_grant)
    revoke = commands.add_parser("revoke", help="take actions from a role's grant",
                                 description="Take actions from the role's grant on exactly "
                                 "this resource (a prefix grant is revoked by naming the "
                                 "prefix). A no-op if it had none.")
    _target(revoke)
    revoke.set_defaults(func=_revoke)
    listing = commands.add_parser("list", help="list grants (super-users only)",
                                  description="Print every grant (or one role's), one per "
                                  "line: role, kind, resource, actions.")
    listing.add_argument("--role", default=None, help="only this role's grants")
    listing.add_argument("--json", action="store_true", help="print JSON")
    add_endpoint_option(listing)
    listing.set_defaults(func=_list)
