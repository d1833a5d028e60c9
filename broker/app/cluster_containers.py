"""Who owns each segment container, read from ZooKeeper for ``folio cluster describe``.

Container ``n``'s owner is the ephemeral node ``/containers/<n>/owner``
(``broker.cluster.containers``); no node: no broker serves it now (being
handed over, or no broker up). Read once, node by node: a snapshot for a
person, not a consistent cut.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.cluster.containers import OwnerRecord, owner_path
from ledger.api import MetadataStore
from ledger.errors import NoNodeError

__all__ = ["container_owners", "describe_owners"]


async def container_owners(store: MetadataStore,
                           container_count: int) -> list[OwnerRecord | None]:
    """Each container's owner record, by container number; None where none is held."""
    owners: list[OwnerRecord | None] = []
    for container in range(container_count):
        try:
            found = await store.get(owner_path(container))
        except NoNodeError:
            owners.append(None)
            continue
        owners.append(OwnerRecord.from_bytes(found.data))
    return owners


def _numbers(containers: Sequence[int]) -> str:
    return ",".join(str(n) for n in containers)


def describe_owners(owners: Sequence[OwnerRecord | None]) -> list[str]:
    """Lines for people: each owning broker with its containers, then the unowned ones."""
    by_broker: dict[tuple[str, str], list[int]] = {}
    unowned: list[int] = []
    for container, owner in enumerate(owners):
        if owner is None:
            unowned.append(container)
        else:
            by_broker.setdefault((owner.broker_id, owner.address), []).append(container)
    lines = [f"containers ({len(owners)}):"]
    for (broker_id, address), containers in sorted(by_broker.items()):
        lines.append(f"  {broker_id} ({address or 'no address'}): {len(containers)} "
                     f"[{_numbers(containers)}]")
    if unowned:
        lines.append(f"  no owner now: {len(unowned)} [{_numbers(unowned)}]")
    return lines
