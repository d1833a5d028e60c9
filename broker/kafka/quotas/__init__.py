"""Kafka client quotas (KIP-13, KIP-55, KIP-219, KIP-546): stored, described, altered, enforced.

- ``table``: entities and quota values, Kafka's rules for changing, filtering
  and resolving them (pure);
- ``store``: the table in the metadata store, watched by every broker;
- ``rate``: Kafka's sampled byte rate and throttle time;
- ``enforcer``: one broker's Produce and Fetch byte rates per client;
- ``mute``: one connection's throttle times and the mute after them.

DescribeClientQuotas and AlterClientQuotas are served by
``broker.kafka.handlers.client_quotas``; docs/kafka.md, "Client quotas".
"""
