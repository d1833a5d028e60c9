"""Binding a broker's Kafka listeners, each with its own context on the shared state.

Imported by ``broker.app.kafka_listener`` once the broker serves Kafka (it
needs kio). Every listener serves a ``KafkaContext`` of its own: the first
one's, which holds the broker's Kafka state (coordinators, fetch sessions,
quotas, producer ids, transactions), copied by ``dataclasses.replace`` with
the listener's name, advertised address and security; and each answers its
clients with addresses of its own name (docs/kafka.md, "Listeners"): in a
cluster through ``ClusterKafka.listener`` (every broker's listener of that
name), on a standalone this broker's address on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from broker.app.cluster_ownership import ClusterOwnership
from broker.app.kafka_cluster import ClusterKafka, kafka_address
from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.locator import LocalLocator, Node
from broker.kafka.nodes import node_id_of
from broker.kafka.sasl.security import KafkaSecurity
from broker.kafka.server import KafkaServer
from broker.kafka_listener_specs import KafkaListenerSpec

__all__ = ["serve_listeners"]


async def serve_listeners(specs: tuple[KafkaListenerSpec, ...], context: KafkaContext,
                          security: Callable[[KafkaListenerSpec], KafkaSecurity],
                          cluster: ClusterKafka | None,
                          ownership: ClusterOwnership | None) -> list[KafkaServer]:
    """Bind a server per listener (``context`` is the first's, ready to serve).

    ``security``: a listener's TLS and SASL (the first's is ``context``'s).
    The addresses are published on ``ownership`` (with its records, at its
    ``start``). Raises ``OSError`` naming the listener whose address is
    taken, the others stopped again.
    """
    contexts = [context] + [dataclasses.replace(
        context, host=spec.advertised_host, port=0, advertised_port=spec.advertised_port,
        security=security(spec), listener=spec.name) for spec in specs[1:]]
    for each in contexts:
        def this(each: KafkaContext = each) -> Node:
            node_id = NODE_ID if ownership is None else node_id_of(ownership.owners.broker_id)
            return Node(node_id, each.host, each.advertised_port or each.port)
        if cluster is not None:
            each.nodes = each.locator = cluster.listener(each.listener, this)
        else:
            each.locator = LocalLocator(this)
    servers: list[KafkaServer] = []
    for spec, each in zip(specs, contexts, strict=True):
        server = KafkaServer(each, spec.host, spec.port)
        try:
            await server.start()
        except OSError as error:
            for started in servers:  # undone: no listener is left half-started
                await started.stop()
            await server.stop()
            raise OSError(f"cannot serve Kafka on {kafka_address(spec.host, spec.port)} "
                          f"(listener {spec.name}): {error}") from None
        servers.append(server)
    configs = _listener_configs(specs, contexts)
    for each in contexts:
        each.listener_configs = configs
    if ownership is not None:
        ownership.kafka_address = kafka_address(
            context.host, context.advertised_port or context.port)
        ownership.kafka_listeners = tuple(
            (each.listener, kafka_address(each.host, each.advertised_port or each.port))
            for each in contexts)
    return servers


def _listener_configs(specs: tuple[KafkaListenerSpec, ...],
                      contexts: list[KafkaContext]) -> tuple[str, str, str]:
    """DescribeConfigs' ``listeners``, ``advertised.listeners`` and the protocol map."""
    pairs = list(zip(specs, contexts, strict=True))
    return (",".join(f"{spec.name}://{kafka_address(spec.host, each.port)}"
                     for spec, each in pairs),
            ",".join(f"{spec.name}://{kafka_address(each.host, each.advertised_port or each.port)}"
                     for spec, each in pairs),
            ",".join(f"{spec.name}:{spec.protocol.value}" for spec in specs))
