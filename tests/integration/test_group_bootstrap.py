"""A reader group made before the client bootstrapped uses the broker that answered.

The endpoint list starts with an address where nothing listens: bootstrap
skips it and closes its channel. The group's calls (made on the stub of the
admin broker of the moment) must then go to the broker that answered, not to
that closed channel (they failed with grpc's "Channel is closed" UsageError,
seen under load in tests/cluster/test_rolling_restart.py when the first
endpoint was slow to answer).
"""

from __future__ import annotations

import folio
from tests.support.bookies import BookieProcess
from tests.support.zookeeper import free_port


def test_a_group_made_before_bootstrap_uses_the_broker_that_answered(
        server: BookieProcess) -> None:
    with folio.Client(server.address, timeout_s=30) as setup:
        setup.create_topic("bootstrap-group", 2)
        with setup.writer("bootstrap-group") as writer:
            writer.write_event(b"e0", routing_key="k").result(30)
    with folio.Client(f"127.0.0.1:{free_port()},{server.address}", timeout_s=30) as client:
        group = client.reader_group("g-bootstrap", ["bootstrap-group"], "earliest")
        with group.reader("r0") as reader:
            read = reader.read_next(timeout=30)
            assert read is not None and read.event is not None
            assert read.event.payload == b"e0"
        assert group.online_readers() == []
