"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0.

They read and change the SCRAM credentials in the metadata store
(``broker.kafka.sasl.credentials``), the ones ``folio kafka-user`` manages:
what one broker changes, every broker of the cluster authenticates with.
Mechanism numbers are Kafka's: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.

Who may call them: with token authentication, the rows of
``broker.kafka.access.KAFKA_TABLE`` (the cluster: super-users;
CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka asks ALTER/DESCRIBE on the
cluster). Without it there are no grants, but a listener that still
authenticates (SCRAM, client certificates) keeps the credentials to the
super-users all the same; one that authenticates no one lets anyone who can
reach the port, as every other admin API there. Kafka's rules for a request: a user named
twice answers DUPLICATE_RESOURCE for that user, an iteration count outside
[4096, 16384] or an empty salt UNACCEPTABLE_CREDENTIAL, deleting a credential
that does not exist RESOURCE_NOT_FOUND; the other users' changes still apply.
The store unreachable answers the retriable REQUEST_TIMED_OUT for every
user (the change may or may not have applied: a retry is safe, an upsert
writes the same credential again).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.access import CLUSTER, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.messages import build, nested, response_class
from broker.kafka.sasl.credentials import ScramTable
from broker.kafka.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted
from ledger.errors import LedgerError

__all__ = ["ALTER_KEY", "DESCRIBE_KEY", "MECHANISMS", "ROWS"]

DESCRIBE_KEY = 50
ALTER_KEY = 51
#: Kafka's ScramMechanism numbers.
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_NUMBERS = {name: number for number, name in MECHANISMS.items()}
_ZERO = datetime.timedelta(0)


def _refusal(context: KafkaContext, call: Call) -> tuple[ErrorCode, str] | None:
    security = context.security
    if security is None:
        return ErrorCode.unsupported_version, "SCRAM credentials are not served here"
    if context.authorizer is not None:  # token authentication: the access table's row
        may = allowed(context, call, CLUSTER, "")
    elif security.authenticates:  # no grants, yet only super-users (see the module doc)
        may = call.principal is not None and call.principal.role in security.super_users
    else:
        may = True
    if may:
        return None
    return (CLUSTER.refused, "only super-users may manage SCRAM credentials")


async def handle_describe(context: KafkaContext, call: Call) -> Any:
    """The mechanisms and iteration counts of the named users (all users: null)."""
    cls = response_class(DESCRIBE_KEY, call.version)
    result_cls = nested(cls, "DescribeUserScramCredentialsResult")
    info_cls = nested(cls, "CredentialInfo")
    refused = _refusal(context, call)
    if refused is not None:
        return build(cls, throttle_time=_ZERO, error_code=refused[0],
                     error_message=refused[1], results=())
    assert context.security is not None  # _refusal checked it
    try:
        table = await context.security.credentials.read()
    except LedgerError as error:
        return build(cls, throttle_time=_ZERO, error_code=ErrorCode.request_timed_out,
                     error_message=f"the metadata store did not answer: {error}", results=())
    asked = call.request.users
    names = sorted(table) if asked is None else [user.name for user in asked]
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            results.append(build(result_cls, user=name, error_code=ErrorCode.duplicate_resource,
                                 error_message="user named twice", credential_infos=()))
            continue
        credentials = table.get(name, {})
        infos = tuple(build(info_cls, mechanism=_NUMBERS[mechanism],
                            iterations=credential.iterations)
                      for mechanism, credential in sorted(credentials.items()))
        if not infos:
            results.append(build(result_cls, user=name, error_code=ErrorCode.resource_not_found,
                                 error_message=f"user {name!r} has no SCRAM credentials",
                                 credential_infos=()))
        else:
            results.append(build(result_cls, user=name, error_code=ErrorCode.none,
                                 error_message=None, credential_infos=infos))
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
                 results=tuple(results))


def _check(request: Any) -> dict[str, tuple[ErrorCode, str]]:
    """Users refused before any change: user -> (code, message)."""
    refused: dict[str, tuple[ErrorCode, str]] = {}
    seen: set[tuple[str, int]] = set()
    for item in (*request.deletions, *request.upsertions):
        key = (item.name, int(item.mechanism))
        if not item.name:
            refused[item.name] = (ErrorCode.unacceptable_credential, "empty user name")
        elif key in seen:
            refused[item.name] = (ErrorCode.duplicate_resource,
                                  "a mechanism of this user is changed twice")
        elif int(item.mechanism) not in MECHANISMS:
            refused[item.name] = (ErrorCode.unsupported_sasl_mechanism,
                                  f"mechanism {int(item.mechanism)} is not SCRAM-SHA-256 (1) "
                                  "or SCRAM-SHA-512 (2)")
        seen.add(key)
    for item in request.upsertions:
        if item.name in refused:
            continue
        if not MIN_ITERATIONS <= int(item.iterations) <= MAX_ITERATIONS:
            refused[item.name] = (ErrorCode.unacceptable_credential,
                                  f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
        elif not item.salt or not item.salted_password:
            refused[item.name] = (ErrorCode.unacceptable_credential,
                                  "salt and salted password must not be empty")
    return refused


async def handle_alter(context: KafkaContext, call: Call) -> Any:
    """Delete and upsert credentials in one compare-and-set (see the module doc)."""
    cls = response_class(ALTER_KEY, call.version)
    result_cls = nested(cls, "AlterUserScramCredentialsResult")
    request = call.request
    users = list(dict.fromkeys(item.name for item in (*request.deletions, *request.upsertions)))
    refused_all = _refusal(context, call)
    if refused_all is not None:
        return build(cls, throttle_time=_ZERO, results=tuple(
            build(result_cls, user=user, error_code=refused_all[0],
                  error_message=refused_all[1]) for user in users))
    assert context.security is not None  # _refusal checked it
    refused = _check(request)
    missing: dict[str, str] = {}

    def edit(table: ScramTable) -> ScramTable:
        missing.clear()
        changed = {user: dict(mechanisms) for user, mechanisms in table.items()}
        for item in request.deletions:
            if item.name in refused:
                continue
            mechanism = MECHANISMS[int(item.mechanism)]
            if changed.get(item.name, {}).pop(mechanism, None) is None:
                missing[item.name] = mechanism
        for item in request.upsertions:
            if item.name in refused or item.name in missing:
                continue
            mechanism = MECHANISMS[int(item.mechanism)]
            changed.setdefault(item.name, {})[mechanism] = credential_from_salted(
                mechanism, item.salted_password, item.salt, int(item.iterations))
        return {user: mechanisms for user, mechanisms in changed.items() if mechanisms}

    try:
        await context.security.credentials.change(edit)
    except LedgerError as error:
        # Unknown outcome: the change may have applied; the client retries it.
        return build(cls, throttle_time=_ZERO, results=tuple(
            build(result_cls, user=user, error_code=ErrorCode.request_timed_out,
                  error_message=f"the metadata store did not answer: {error}")
            for user in users))
    results = []
    for user in users:
        if user in refused:
            code, message = refused[user]
        elif user in missing:
            code, message = (ErrorCode.resource_not_found,
                             f"user {user!r} has no {missing[user]} credential")
        else:
            code, message = ErrorCode.none, ""
        results.append(build(result_cls, user=user, error_code=code,
                             error_message=message or None))
    return build(cls, throttle_time=_ZERO, results=tuple(results))


ROWS = (
    Api(DESCRIBE_KEY, "DescribeUserScramCredentials", 0, 0, handle_describe),
    Api(ALTER_KEY, "AlterUserScramCredentials", 0, 0, handle_alter),
)
