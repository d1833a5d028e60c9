"""Reader group members in processes of their own: SIGKILL under load, SIGTERM, id take-over.

Three members (``tests.support.group_member``, each printing every event it
processed before its next read) read a topic while a writer keeps writing;
one is SIGKILLed. The broker declares it offline after the group's session
timeout (2 s here) and the others take its segments; in the end every event
written was printed by some member (at-least-once from the last reported
position, nothing skipped) and nothing else. A new process then joins with
the dead member's id (taken over once it was declared offline). A
``folio consume --group`` that gets SIGTERM leaves the group as on Ctrl-C,
handing its segments back at its position. After a broker crash and restart
(liveness is kept in memory) a live member keeps its segments and a member
that died meanwhile is declared offline by the restarted broker.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import folio
from tests.support.bookies import BookieProcess, BookieProcesses, folio_argv, folio_env
from tests.support.member_process import MemberProcess, OutputLines
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

_TIMEOUT_MS = 2000


def _write_until(client: folio.Client, topic: str, stop: threading.Event,
                 written: list[str], errors: list[BaseException]) -> None:
    """60 keys, one event each per round, every round acknowledged before the next."""
    try:
        with client.writer(topic, linger_ms=2) as writer:
            n = 0
            while not stop.is_set() or n < 20:
                futures = [(f"k{i}:{n}", writer.write_event(f"k{i}:{n}".encode(),
                                                             routing_key=f"k{i}"))
                           for i in range(60)]
                for payload, future in futures:
                    future.result(60)
                    written.append(payload)
                n += 1
    except BaseException as error:  # reported by the test thread
        errors.append(error)


def test_sigkilled_member_is_declared_offline_and_the_others_read_everything(
        server: BookieProcess, tmp_path: Path) -> None:
    with folio.Client(server.address, timeout_s=30) as client:
        client.create_topic("load", 6)
        group = client.reader_group("g-kill", ["load"], "earliest",
                                    session_timeout_ms=_TIMEOUT_MS)
        stop, written, errors = threading.Event(), list[str](), list[BaseException]()
        writer = threading.Thread(target=_write_until,
                                  args=(client, "load", stop, written, errors))
        writer.start()
        members = [MemberProcess(tmp_path, server.address, "g-kill", "load", f"m{i}",
                                 _TIMEOUT_MS) for i in range(3)]
        try:
            wait_for(lambda: all(m.joined for m in members), "three members joined", 60)
            wait_for(lambda: all(len(group.assignment().get(m.reader_id, [])) == 2
                                 for m in members), "two segments each", 60)
            victim = members[1]
            wait_for(lambda: len(victim.events()) >= 100, "the victim read events", 60)
            orphaned = set(group.assignment()["m1"])
            written_at_kill = len(written)
            assert victim.stop(signal.SIGKILL) == -signal.SIGKILL
            # Only the broker can free them: nobody closed m1 or called reader_offline.
            wait_for(lambda: "m1" not in group.online_readers(), "m1 declared offline", 60)
            wait_for(lambda: orphaned <= set(group.assignment()["m0"]) |
                     set(group.assignment()["m2"]), "m1's segments taken by m0 and m2", 60)
            stop.set()
            writer.join(120)
            assert not errors, errors
            expected = set(written)
            assert len(expected) == len(written) >= 20 * 60
            assert len(written) > written_at_kill  # the writer kept writing through it

            def printed() -> set[str]:
                return {e for m in members for e in m.events()}

            wait_for(lambda: expected <= printed(), "every written event printed", 120)
            assert printed() == expected  # nothing that was not written
            # The dead member's id is free again: a new process takes it over.
            members.append(MemberProcess(tmp_path, server.address, "g-kill", "load", "m1",
                                         _TIMEOUT_MS))
            wait_for(lambda: members[-1].joined, "m1 joined again", 60)
            wait_for(lambda: len(group.assignment()["m1"]) == 2, "m1 got its share back", 60)
            for member in (members[0], members[2], members[3]):
                assert member.stop(signal.SIGTERM) == 0, member.log()
            assert group.online_readers() == []
            assert sorted(group.assignment()[""]) == [f"load/{i}" for i in range(6)]
        finally:
            stop.set()
            writer.join(120)
            for member in members:
                member.reap()


def test_sigterm_makes_folio_consume_group_leave_cleanly(server: BookieProcess) -> None:
    with folio.Client(server.address, timeout_s=30) as client:
        client.create_topic("term", 3)
        with client.writer("term") as writer:
            for n in range(30):
                writer.write_event(f"e{n}".encode(), routing_key=f"k{n}")
            writer.flush()
        process = subprocess.Popen(
            folio_argv("consume", "term", "--group", "g-term", "--from-beginning",
                       "--reader-id", "c1", "--endpoint", server.address),
            env=folio_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None
        out = OutputLines(process.stdout)
        try:
            wait_for(lambda: len(out.lines) == 30, "30 events printed", 60)
            group = client.reader_group("g-term")
            assert group.online_readers() == ["c1"]
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
            out.join()
            # Handed back at once (the default 10 s session timeout has not passed),
            # at its position: nothing left to read, nothing read twice next time.
            assert group.online_readers() == []
            described = group.describe()
            assert [s.segment for s in described.unassigned] == [f"term/{i}" for i in range(3)]
            assert described.lag == 0
            assert sum(s.position for s in described.unassigned) == 30
            assert sorted(out.lines) == sorted(f"e{n}" for n in range(30))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(30)
            out.join()
            if process.stderr is not None:
                process.stderr.close()


def test_after_a_broker_restart_live_members_stay_and_dead_ones_are_freed(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    # 6 s: the live member's channel reconnects with up to 2 s of gRPC backoff.
    timeout_ms = 6000
    data_dir = tmp_path / "data"
    server = start_standalone(bookie_processes, data_dir)
    with TcpProxy(server.host, server.port) as proxy, \
            folio.Client(proxy.address, timeout_s=30) as client:
        client.create_topic("restart", 4)
        with client.writer("restart") as writer:
            for n in range(40):
                writer.write_event(f"e{n}".encode(), routing_key=f"k{n}")
            writer.flush()
        group = client.reader_group("g-restart", ["restart"], "earliest",
                                    session_timeout_ms=timeout_ms)
        members = [MemberProcess(tmp_path, proxy.address, "g-restart", "restart", reader_id,
                                 timeout_ms) for reader_id in ("live", "dead")]
        try:
            wait_for(lambda: all(len(group.assignment().get(m.reader_id, [])) == 2
                                 for m in members), "two segments each", 60)
            live, dead = members
            assert dead.stop(signal.SIGKILL) == -signal.SIGKILL
            assert server.kill() == -signal.SIGKILL
            restarted = start_standalone(bookie_processes, data_dir)
            proxy.retarget(restarted.port)
            proxy.cut()
            # The restarted broker knows no heartbeat: it times "dead" from when it
            # first saw it, and frees its segments at the recorded offsets.
            try:
                wait_for(lambda: group.online_readers() == ["live"], "dead declared offline",
                         60)
            except AssertionError as failed:
                raise AssertionError(f"{failed}: {group.describe()}; live member's log: "
                                     f"{live.log()}") from None
            wait_for(lambda: len(group.assignment()["live"]) == 4, "live took all four", 60)
            wait_for(lambda: {e for m in members for e in m.events()} >=
                     {f"e{n}" for n in range(40)}, "every event printed", 60)
            assert "rejoining" not in live.log()  # never declared offline itself
            assert live.stop(signal.SIGTERM) == 0, live.log()
            assert group.online_readers() == []
        finally:
            for member in members:
                member.reap()
