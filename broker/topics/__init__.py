"""Topics: their records, names, key ranges, scaling and the ``TopicManager``.

The manager creates, changes and deletes topics and loads (recovers) their
segments on first use; scaling plans are pure functions over a topic record.
It holds parts that own their state, each with its collaborators passed in:
``loaded.LoadedSegments``, ``catalog.TopicCatalog``, ``crud.TopicCrud``,
``scale.TopicScaling`` and ``maintenance.TopicMaintenance``.
"""

__all__: list[str] = []
