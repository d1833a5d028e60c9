"""The name of every metadata path the broker uses (the ledger's: ``ledger.metadata.paths``).

Under the store's root (a cluster's ZooKeeper chroot, or standalone's
embedded store); use these names, never spell a path out elsewhere
(``tests/unit/test_metadata_paths.py`` fails on a path literal outside this
module and ``ledger.metadata.paths``). The records' formats are the owners':

================================  ======================================  =============  ==========
path                              holds (owner)                           written by     kind
================================  ======================================  =============  ==========
``/brokers/<id>``                 a live broker's ``Registration``, the   the broker     ephemeral
                                  address clients should use
                                  (``broker.cluster.layout``)
``/containers/<n>/owner``         who owns segment container ``n``        the owner      ephemeral
                                  (``broker.cluster.containers``)
``/balance/<id>``                 a broker taking part in the balance     the broker     ephemeral
``/folio/topics/<topic>``         topic records                           brokers        persistent
                                  (``broker.segments.names``)
``/folio/segments/<t>/<n>``       segment records: the chain of ledgers   brokers        persistent
``/folio/groups/<name>``          reader groups                           brokers        persistent
                                  (``broker.groups.store``)
``/folio/group-heartbeats/...``   readers' heartbeats                     brokers        persistent
                                  (``broker.groups.heartbeats``)
``/folio/acl``                    every grant                             admins         persistent
                                  (``broker.auth.acl_store``)
``/folio/kafka/scram``            SCRAM credentials                       admins         persistent
                                  (``broker.kafka.sasl.credentials``)
``/folio/kafka/quotas``           Kafka client quotas                     admins         persistent
                                  (``broker.kafka.quotas.store``)
``/folio/kafka/broker_configs``   Kafka dynamic broker configs            admins         persistent
                                  (``broker.kafka.dynamic_configs``)
``/folio/kafka/delegation_tokens`` Kafka delegation tokens, one child     brokers        persistent
                                  per token id                            serving Kafka
                                  (``broker.kafka.sasl.delegation``)
``/folio/kafka/share_group_configs`` Kafka share groups' configs      admins         persistent
                                  (``broker.kafka.share_groups.group_configs``)
``/folio/kafka/producer_ids``     the next Kafka producer id block        brokers        persistent
                                  (``broker.kafka.producer_ids``)         serving Kafka
================================  ======================================  =============  ==========

The ``/cluster`` record's broker field (``container_count``) is in
``broker.cluster.layout``; ``folio cluster init`` creates ``/brokers`` and
``/folio`` beside the ledger's parents.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACL_PATH",
    "BROKERS_PATH",
    "BROKER_CONFIGS_PATH",
    "CONTAINERS_PATH",
    "DELEGATION_TOKENS_ROOT",
    "FOLIO_PATH",
    "GROUPS_ROOT",
    "HEARTBEATS_ROOT",
    "MEMBERS_PATH",
    "PRODUCER_IDS_PATH",
    "QUOTAS_PATH",
    "SCRAM_PATH",
    "SEGMENTS_ROOT",
    "SHARE_GROUP_CONFIGS_PATH",
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
#: Readers' heartbeats: ``/folio/group-heartbeats/<group>/<reader>``.
HEARTBEATS_ROOT: Final = "/folio/group-heartbeats"
#: The node holding every grant.
ACL_PATH: Final = "/folio/acl"
#: The node holding every SCRAM credential.
SCRAM_PATH: Final = "/folio/kafka/scram"
#: Kafka delegation tokens: ``/folio/kafka/delegation_tokens/<token_id>``.
DELEGATION_TOKENS_ROOT: Final = "/folio/kafka/delegation_tokens"
#: The node holding every Kafka client quota.
QUOTAS_PATH: Final = "/folio/kafka/quotas"
#: Kafka's dynamic broker configs (``broker.kafka.dynamic_configs``): one node.
BROKER_CONFIGS_PATH: Final = "/folio/kafka/broker_configs"
#: Kafka share groups' configs in a cluster (``broker.kafka.share_groups.group_configs``).
SHARE_GROUP_CONFIGS_PATH: Final = "/folio/kafka/share_group_configs"
#: The Kafka producer ids reserved so far (blocks taken by compare-and-set).
PRODUCER_IDS_PATH = "/folio/kafka/producer_ids"
#: Parent of the containers' nodes.
CONTAINERS_PATH = "/containers"
#: Parent of the balance members' nodes.
MEMBERS_PATH = "/balance"
