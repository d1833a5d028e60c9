"""How the SDK talks to a broker: everything below the writers and readers.

- ``io_thread``: the client's one background asyncio thread (``IoThread``) and
  a ``Connection`` (one gRPC channel with its stubs).
- ``pool``: the bounded channel pool of one broker (PDP-36): writers and
  readers are *flows* on the least busy channel.
- ``brokers``: the client's brokers (``Brokers``): bootstrap from an endpoint
  list, one pool per broker, segment owners, WrongHost followed, admin
  failover; ``addresses``: when two addresses are one broker, endpoint lists.
- ``append_stream``: the multiplexed ``Append`` stream of one channel, routing
  replies to flows by request id, and the reconnect ``Backoff``.
- ``segment_streams``: the read streams (one per segment) and their tail waits.
- ``unpack``: blocks read back into events.
- ``scaling``: what writers and readers are given to follow sealed segments.
- ``flow_state``: the one state machine of every append flow (``FlowState``,
  its tight transition table, ``move`` raising ``FlowStateError`` on a bad
  move); the engine that moves it is ``folio._flow``.
- ``unary``: ``UnaryCaller``, the shape of a blocking admin call handed down.

Nothing here imports the writers, readers or the client.
"""

__all__: list[str] = []
