"""Reader groups: their state (conditional updates), member liveness and backlog.
"""

__all__: list[str] = []
