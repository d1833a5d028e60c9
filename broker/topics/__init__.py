"""Topics: their records, names, key ranges, scaling and the ``TopicManager``.

The manager creates, changes and deletes topics and loads (recovers) their
segments on first use; scaling plans are pure functions over a topic record.
"""

__all__: list[str] = []
