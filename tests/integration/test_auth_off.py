"""Without token authentication, grants are kept but nothing is enforced."""

from __future__ import annotations

import folio


def test_grants_are_kept_but_not_enforced_when_authentication_is_off(
        client: folio.Client) -> None:
    client.grant_permission("reader-only", "open.*", ["consume"])
    assert [(g.role, g.resource, g.actions) for g in client.list_permissions()] == [
        ("reader-only", "open.*", ("consume",))]
    # Any caller, with or without a token, may do everything.
    client.create_topic("open.t", segments=1)
    with client.writer("open.t") as writer:
        writer.write_event(b"x").result(timeout=30)
    client.delete_topic("open.t")
    client.revoke_permission("reader-only", "open.*", ["consume"])
    assert client.list_permissions() == []
