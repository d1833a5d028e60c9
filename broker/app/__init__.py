"""The processes: ``folio standalone`` and ``folio broker``, their wiring and commands.

The one place that knows every part: it builds the ledger client, topics,
coordinator, groups and server, and starts and stops them in order.
"""

__all__: list[str] = []
