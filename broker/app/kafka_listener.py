"""Starting the Kafka listener (``--kafka-port``) when the settings ask for one.

The Kafka front-end (``broker.kafka``) and its wire library (kio) are
imported only then, so a broker without the ``kafka`` extra installed runs
as before and says what to install when asked to serve Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.broker_config import BrokerConfig
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator
from ledger.api import MetadataStore

if TYPE_CHECKING:
    from broker.kafka.server import KafkaServer

__all__ = ["KafkaUnavailableError", "start_kafka"]


class KafkaUnavailableError(Exception):
    """The settings ask for a Kafka listener but its libraries are not installed."""


async def start_kafka(config: BrokerConfig, topics: TopicManager,
                      store: MetadataStore,
                      txn_coordinator: TxnCoordinator | None = None) -> KafkaServer | None:
    """The started Kafka listener, or None when ``kafka_port`` is -1 (off).

    Consumer groups are served with it; transactional producers too when
    ``txn_coordinator`` is given (their transactions are Folio's).

    Raises ``OSError`` if the port is taken, ``KafkaUnavailableError`` without
    the ``kafka`` extra.
    """
    if config.kafka_port == -1:
        return None
    try:
        # Imported here: only a broker that serves Kafka needs kio.
        from broker.kafka.context import NODE_ID, KafkaContext  # noqa: PLC0415
        from broker.kafka.coordinators import start_coordinators  # noqa: PLC0415
        from broker.kafka.handlers.transactions import install  # noqa: PLC0415
        from broker.kafka.locator import Node  # noqa: PLC0415
        from broker.kafka.producer_ids import ProducerIds  # noqa: PLC0415
        from broker.kafka.server import KafkaServer  # noqa: PLC0415
    except ImportError as error:
        raise KafkaUnavailableError(
            f"--kafka-port needs the kafka extra (pip install 'folio[kafka]'): {error}"
        ) from None
    context = KafkaContext(topics, config.kafka_advertised_host or config.host,
                           ProducerIds(store), advertised_port=config.kafka_advertised_port)
    # Offsets, group records and transactional ids are loaded before serving.
    context.coordinators = await start_coordinators(
        topics, txn_coordinator, context.producer_ids,
        lambda: Node(NODE_ID, context.host, context.advertised_port or context.port),
        context.stopping)
    if context.coordinators.txns is not None:
        install(context)
    server = KafkaServer(context, config.host, config.kafka_port)
    try:
        await server.start()
    except OSError as error:
        raise OSError(f"cannot serve Kafka on {config.host}:{config.kafka_port}: "
                      f"{error}") from None
    return server
