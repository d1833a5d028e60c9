"""Generated gRPC and protobuf stubs (``scripts/gen_protos.py``); do not edit.

``folio.api.v1`` is the public API; ``folio.api.ledger.v1`` the internal
bookie protocol that only the server packages use.
"""
