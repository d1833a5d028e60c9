"""Both client faces show the same admin calls: the names, signatures, docs of AdminCore."""

from __future__ import annotations

import inspect

from folio import Client
from folio.admin import AdminCore
from folio.aio import AsyncClient

#: The admin coroutines that are parts' plumbing, not public calls.
_INTERNAL = {"unary", "successors"}


def _public_coroutines() -> list[str]:
    return sorted(name for name, member in vars(AdminCore).items()
                  if inspect.iscoroutinefunction(member) and not name.startswith("_")
                  and name not in _INTERNAL)


def test_every_admin_call_is_on_both_faces_with_its_signature_and_doc() -> None:
    names = _public_coroutines()
    assert "create_topic" in names and "transaction_status" in names
    for name in names:
        core = getattr(AdminCore, name)
        for face in (Client, AsyncClient):
            shown = getattr(face, name)
            assert shown.__doc__ == core.__doc__, (face.__name__, name)
            assert inspect.signature(shown) == inspect.signature(core), (face.__name__, name)
        assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name
        assert not inspect.iscoroutinefunction(getattr(Client, name)), name


def test_group_calls_keep_their_signature_on_the_client() -> None:
    from folio._client_groups import GroupCalls  # noqa: PLC0415

    for name in ("reader_group", "delete_reader_group", "list_reader_groups", "batch_client",
                 "list_groups", "kafka_group"):
        assert inspect.signature(getattr(Client, name)) == \
            inspect.signature(getattr(GroupCalls, name)), name
