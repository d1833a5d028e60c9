"""Kafka client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546, KIP-599, KIP-612).

Stored, described, altered, enforced:

- ``table``: entities and quota values, Kafka's rules for changing, filtering
  and resolving them (pure);
- ``store``: the table in the metadata store, watched by every broker;
- ``rate``: Kafka's sampled rate, throttle time and token bucket;
- ``enforcer``: one broker's Produce and Fetch byte rates and request times
  per client;
- ``timing``: the time the broker spends on one request (its handler's steps);
- ``mutations``: the controller mutation quota (CreateTopics,
  CreatePartitions, DeleteTopics);
- ``connections``: the per-IP connection rate and counts, the broker's and the
  listeners' caps and creation rates;
- ``limits``: the connection limits in force (the flags under the dynamic broker
  configs, ``broker.kafka.dynamic_configs``);
- ``throttles``: the metrics every quota type shares;
- ``mute``: one connection's throttle times and the mute after them.

DescribeClientQuotas and AlterClientQuotas are served by
``broker.kafka.handlers.client_quotas``; docs/kafka.md, "Client quotas".
"""
