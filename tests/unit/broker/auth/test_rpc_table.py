"""The permission table: every RPC the broker serves has a row, and each row is enforced as it says.

The public protos (folio/api) and the brokers' internal one (broker/_proto) are enumerated.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Any, cast

import pytest
from google.protobuf.message_factory import GetMessageClass

import broker._proto.v1
import folio.api.v1
from broker.auth.acl_store import AclStore
from broker.auth.authorizer import Authorizer
from broker.auth.permissions import AclTable, Action, Grant, ResourceKind
from broker.auth.rpc_table import RPC_TABLE, Need, rule_for
from broker.errors import PermissionDeniedError

if TYPE_CHECKING:
    from ledger.api import MetadataStore


def _public_methods() -> dict[str, Any]:
    """Every RPC of every service of every public and internal proto, from the descriptors."""
    methods = {}
    for package in (folio.api.v1, broker._proto.v1):
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.endswith("_pb2"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for service in module.DESCRIPTOR.services_by_name.values():
                for method in service.methods:
                    methods[f"/{service.full_name}/{method.name}"] = method
    return methods


def test_every_public_rpc_is_classified_and_nothing_else() -> None:
    methods = _public_methods()
    assert len(methods) >= 29
    missing = sorted(set(methods) - set(RPC_TABLE))
    assert missing == [], f"RPCs without a row in broker/auth/rpc_table.py: {missing}"
    assert sorted(set(RPC_TABLE) - set(methods)) == []


def test_the_internal_rpcs_need_a_super_user() -> None:
    internal = [method for method in RPC_TABLE if "/folio.broker.v1." in method]
    assert sorted(m.rsplit("/", 1)[1] for m in internal) == [
        "AddKafkaTxnOffsets", "AppendKafkaBatch", "CommitKafkaTxnOffsets", "FindKafkaTxn",
        "OffsetForTime", "PendingKafkaTxnOffsets", "RegisterTxnSegment", "ShareState",
        "WriteTxnMarker"]
    assert all(RPC_TABLE[method].need is Need.SUPER_USER for method in internal)


def test_an_unknown_method_needs_a_super_user() -> None:
    assert rule_for("/folio.v1.Admin/NotYetInvented").need is Need.SUPER_USER


class _Acls(AclStore):
    def __init__(self, table: AclTable) -> None:  # no store (never started): the table given
        super().__init__(cast("MetadataStore", None))
        self._node.table = table


def _grants_for(rule_need: Need, resources: list[tuple[ResourceKind, str]]) -> list[Grant]:
    action = rule_need.action or Action.CONSUME  # LOOKUP: any permission
    return [Grant("r", kind, name, frozenset({action})) for kind, name in resources]


@pytest.mark.parametrize("method", sorted(RPC_TABLE), ids=lambda m: m.rsplit("/", 1)[1])
def test_each_row_refuses_without_and_allows_with_its_permission(method: str) -> None:
    rule = RPC_TABLE[method]
    # Any: the request type varies with the row; its fields are set by name below.
    request: Any = GetMessageClass(_public_methods()[method].input_type)()
    # Fill every resource field the row reads, so its names are not empty.
    for field in request.DESCRIPTOR.fields:
        if field.name in ("name", "topic") and field.type == field.TYPE_STRING:
            setattr(request, field.name, "orders.eu")
        if field.name == "segment" and field.type == field.TYPE_STRING:
            request.segment = "orders.eu/3"
    if request.DESCRIPTOR.name in ("GrantPermissionRequest", "RevokePermissionRequest"):
        request.grant.resource = "orders.eu"
        request.grant.kind = 1
    if request.DESCRIPTOR.name == "CreateReaderGroupRequest":
        request.state.topics.append("orders.eu")
    if request.DESCRIPTOR.name == "AppendCommand":
        request.setup_append.segment = "orders.eu/3"
        resources = [(ResourceKind.TOPIC, "orders.eu")]
    else:
        resources = rule.resources(request)

    nobody = Authorizer(_Acls(AclTable()), super_users={"root"})
    if rule.per_flow:
        check = nobody.setup_check("r", rule)
        with pytest.raises(PermissionDeniedError,
                           match=r"lacks produce permission on topic 'orders\.eu'"):
            check("orders.eu/3")
        Authorizer(_Acls(AclTable(_grants_for(rule.need, resources)))).setup_check(
            "r", rule)("orders.eu/3")
        return
    denial = nobody.denial("r", rule, request)
    assert nobody.denial("root", rule, request) is None
    if rule.need is Need.AUTHENTICATED:
        assert denial is None and resources == []
        return
    assert denial is not None and "'r'" in denial
    if rule.need is Need.SUPER_USER:
        assert "super-user" in denial
        return
    assert resources and any(name in denial for _kind, name in resources)
    if rule.need.action is not None:
        assert rule.need.action.value in denial
    allowed = Authorizer(_Acls(AclTable(_grants_for(rule.need, resources))))
    assert allowed.denial("r", rule, request) is None
