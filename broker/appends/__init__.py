"""Appends: one Append stream's engine (``stream``) and the bounds on held blocks (``held``).

Every append, plain or transactional, goes through ``stream``; a single-routing-key
transaction (PDP-44) is blocks held per flow (``held``) and written as one entry.
"""

__all__: list[str] = []
