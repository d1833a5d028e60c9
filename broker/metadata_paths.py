"""The name of every metadata path the broker uses (the ledger's: ``ledger.metadata.paths``)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACL_PATH",
    "BROKERS_PATH",
    "CONTAINERS_PATH",
    "FOLIO_PATH",
    "GROUPS_ROOT",
    "HEARTBEATS_ROOT",
    "MEMBERS_PATH",
    "PRODUCER_IDS_PATH",
    "SCRAM_PATH",
    "SEGMENTS_ROOT",
    "TOPICS_ROOT",
]

#: Live brokers: one ephemeral child per broker, named by its id.
BROKERS_PATH = "/brokers"
#: The broker's records (topics, segments, reader groups) live under it.
FOLIO_PATH = "/folio"
#: Topic records: ``/folio/topics/<topic>``.
TOPICS_ROOT = "/folio/topics"
#: Segment records: ``/folio/segments/<topic>/<number>``.
SEGMENTS_ROOT = "/folio/segments"
#: Group records: ``/folio/groups/<name>``.
GROUPS_ROOT: Final = "/folio/groups"
HEARTBEATS_ROOT: Final = "/folio/group-heartbeats"
#: The node holding every grant.
ACL_PATH: Final = "/folio/acl"
#: The node holding every SCRAM credential.
SCRAM_PATH: Final = "/folio/kafka/scram"
PRODUCER_IDS_PATH = "/folio/kafka/producer_ids"
#: Parent of the containers' nodes.
CONTAINERS_PATH = "/containers"
#: Parent of the balance members' nodes.
MEMBERS_PATH = "/balance"
