"""Transactions.

- Single routing key (PDP-44): ``txn`` (``SingleRoutingKeyTransactionWriter``:
  one open transaction at a time, timeouts, following a seal),
  ``_txn_transaction`` (``SingleRoutingKeyTransaction``), ``_txn_buffer``
  (its events packed into blocks, the 16 MiB limit), ``_txn_commit`` (a
  commit on its way, ``TransactionResult``), ``_txn_flow`` (its flow's policy on the
  one flow engine, ``folio._flow``: each commit written as one atomic block
  sequence, one at a time, coalescing commits).
- Full (PIP-178 style, across segments and topics): ``txn_full``
  (``TransactionalWriter``, ``Transaction``: the blocking face),
  ``_full_core`` (one transaction's state, buffers and flows, without waits:
  what both faces hold), ``_full_routes`` (the open segments by key range),
  ``_full_buffer`` (per-segment blocks), ``_full_flow`` (one flow per segment and transaction: its
  policy on the flow engine),
  ``_full_decide`` (commit/abort when answers are lost).
- ``txn_status`` (``TxnStatus``).

The public names are re-exported by ``folio``; import them from there.
"""

__all__: list[str] = []
