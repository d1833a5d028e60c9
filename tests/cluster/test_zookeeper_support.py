"""The test support's ZooKeeper (tests/support/zookeeper.py): a real server, chroots, restart."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient

from tests.support.zookeeper import ZooKeeperServer, four_letter_word, zk_client


def test_server_answers_and_chroot_is_fresh(zookeeper: ZooKeeperServer, zk_url: str) -> None:
    assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
    assert zk_url.startswith(f"zk://{zookeeper.address}/t-")
    chroot = zk_url.removeprefix(f"zk://{zookeeper.address}")
    client = zk_client(zookeeper.address + chroot)
    try:
        assert client.get_children("/") == []
    finally:
        client.stop()
        client.close()


def test_restart_keeps_port_and_data(
    make_zookeeper: Callable[[], ZooKeeperServer],
) -> None:
    server = make_zookeeper()
    client: KazooClient = zk_client(server.address)
    try:
        client.create("/kept", b"value")
    finally:
        client.stop()
        client.close()
    port = server.port
    server.restart()
    assert server.port == port
    assert four_letter_word(server.host, server.port, "ruok") == "imok"
    client = zk_client(server.address)
    try:
        assert client.get("/kept")[0] == b"value"
    finally:
        client.stop()
        client.close()
    server.stop()
    assert not server.running()
