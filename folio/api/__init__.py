"""Generated gRPC and protobuf stubs (``scripts/gen_protos.py``); do not edit.

``folio.api.v1`` is the public API. The internal bookie protocol's stubs live
beside their owner, in ``ledger._proto.v1``, so the SDK does not ship them.
"""
