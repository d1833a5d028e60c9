"""Generated stubs of the internal ledger protocol (scripts/gen_protos.py); do not edit.

``ledger._proto.v1`` comes from ``proto/ledger/v1`` (the bookie service and the
ledger metadata record). Only the server packages use it; the SDK does not ship it.
"""
