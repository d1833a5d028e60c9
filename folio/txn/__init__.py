"""Transactions: ``txn`` (single routing key, PDP-44: buffered in the client
and committed as one atomic block, over the flow in ``_txn_flow``) and
``txn_full`` (full transactions across segments and topics, PIP-178 style,
made visible by the broker's commit markers); ``txn_status`` (``TxnStatus``).

The public names are re-exported by ``folio``; import them from there.
"""

__all__: list[str] = []
