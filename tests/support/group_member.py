"""A reader group member in a process of its own, for crash tests (SIGKILL, SIGTERM).

``python -m tests.support.group_member ENDPOINT GROUP TOPIC READER_ID SESSION_TIMEOUT_MS``
joins GROUP (created at earliest if missing), prints ``joined`` and then each
event on a line of its own (``PAYLOAD<TAB>SEGMENT<TAB>OFFSET``, read by
``tests/support/member_process.py``), flushed before the next ``read_next``:
so every event it acknowledged (returned before its latest read call) was
printed, and a test comparing what all members printed with what was written
checks at-least-once with nothing skipped. SIGTERM leaves the group cleanly.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import TextIO

import folio


def _interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt


def _member(group: folio.ReaderGroup, reader_id: str, out: TextIO) -> None:
    with group.reader(reader_id) as reader:
        out.write("joined\n")
        out.flush()
        while True:
            read = reader.read_next(timeout=0.1)
            if read is not None and read.event is not None:
                event = read.event
                out.write(f"{event.payload.decode()}\t{event.segment}\t{event.offset}\n")
                out.flush()


def main(argv: list[str]) -> int:
    """Read as one member until SIGTERM/SIGINT; exit 0 after leaving cleanly."""
    endpoint, group_name, topic, reader_id, timeout_ms = argv
    signal.signal(signal.SIGTERM, _interrupt)
    out = sys.stdout
    with folio.Client(endpoint, timeout_s=30) as client:
        group = client.reader_group(group_name, [topic], "earliest",
                                    sync_interval_ms=50, session_timeout_ms=int(timeout_ms))
        try:
            while True:
                try:
                    _member(group, reader_id, out)
                except folio.ReaderNotInGroupError as error:
                    # Declared offline while alive (a machine so loaded that no
                    # heartbeat got through in time): join again, as a Kafka
                    # consumer rejoins its group.
                    print(f"rejoining: {error}", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
