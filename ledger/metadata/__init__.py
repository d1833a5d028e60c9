"""Metadata: the embedded MetadataStore and the persisted ledger metadata record."""

__all__: list[str] = []
