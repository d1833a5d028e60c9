"""The public wire protocol: generated stubs and the rules every client follows.

``folio.api.v1`` holds the gRPC and protobuf stubs made from ``proto/folio/v1``
(``scripts/gen_protos.py``; do not edit the ``*_pb2*`` files) and the
hand-written modules that every client in any language must match:
``routing`` (the routing-key hash, documented in ``events.proto``) and
``block`` (the event-block codec and its size rules); and ``error_table``,
every error the broker answers with (its number, status code, retriability
and Kafka code), which the broker and the SDK both derive their maps from.
The SDK imports nothing above this package from here, so the broker may use
it too.

The internal bookie protocol's stubs live beside their owner, in
``ledger._proto.v1``, so the SDK does not ship them.
"""
