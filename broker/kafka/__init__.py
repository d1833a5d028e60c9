"""The Kafka wire protocol on Folio's topics: a front-end of the broker (docs/kafka.md).

Kafka clients (librdkafka, kafka-python, the Java client...) speak to this
listener as to a one-node Kafka cluster. A Kafka topic is a Folio topic, its
partition ``i`` the topic's segment number ``i``; a Kafka offset is the
Folio event offset in that segment; one Kafka record batch is one Folio block
(one ledger entry), stored as the client sent it (``blocks``) and served back
as it was stored, so the broker does constant work per batch.

Layout, one job per module: ``framing`` (size-prefixed frames), ``connection``
(one client connection: headers, in-order answers, bad frames close it),
``server`` (the asyncio listener), ``dispatch`` (the table api_key ->
handler with supported versions), ``apis`` (the rows of that table),
``handlers/`` (one module per API family), ``messages`` (kio entity helpers),
``error_codes`` (Folio errors -> Kafka error codes), ``batches`` (the record
batch header: checks and base offset), ``blocks`` (record batches in Folio
blocks and back), ``context`` (what handlers share). Consumer groups and
transactions: ``consumer_groups/`` (the group coordinator and committed offsets),
``txns/`` (transactional ids on Folio's transaction coordinator),
``locator`` (which broker coordinates a key: the cluster hook),
``coordinators`` (the three, loaded at the listener's start).

Nothing else in ``broker`` imports this package; ``broker.app`` starts it.
"""
