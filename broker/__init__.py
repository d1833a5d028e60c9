"""The broker: gRPC services over topics and segments stored in ledgers.

Topics and their segments (key ranges, scaling), the append path (blocks,
writer de-duplication, group commit), the read path (isolation levels, long
polls), the transaction coordinator and reader groups. It uses ``txnbuffer``
and ``ledger``; nothing below imports it. Built by the broker-core issue;
this package is empty until then.
"""

__all__: list[str] = []
