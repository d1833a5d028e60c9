"""The metadata URL parser, the cluster layout record, registrations and cluster settings."""

from __future__ import annotations

import pytest

from broker.cluster.layout import BROKERS_PATH, PARENT_PATHS, ClusterLayout, broker_path
from ledger.errors import InvalidArgumentError, MetadataError
from ledger.metadata.cluster_config import ClusterConfig
from ledger.metadata.cluster_layout import (
    BOOKIES_ALL_PATH,
    BOOKIES_AVAILABLE_PATH,
    CLUSTER_PATH,
    LEDGERS_PATH,
    LedgerLayout,
    Registration,
    bookie_all_path,
    bookie_available_path,
)
from ledger.metadata.metadata_url import MetadataUrl, MetadataUrlError, parse_metadata_url


@pytest.mark.parametrize(("url", "servers", "chroot"), [
    ("zk://127.0.0.1:2181/folio", (("127.0.0.1", 2181),), "/folio"),
    ("zk://zk1:2181,zk2:2182,zk3/folio/prod",
     (("zk1", 2181), ("zk2", 2182), ("zk3", 2181)), "/folio/prod"),
    ("ZK://Host-1.example.com:1/c", (("Host-1.example.com", 1),), "/c"),
    ("zk://[::1]:2181,[fe80::1]/f", (("::1", 2181), ("fe80::1", 2181)), "/f"),
    ("  zk://h:2181/f  ", (("h", 2181),), "/f"),
])
def test_good_urls(url: str, servers: tuple[tuple[str, int], ...], chroot: str) -> None:
    parsed = parse_metadata_url(url)
    assert parsed == MetadataUrl(servers=servers, chroot=chroot)
    assert parse_metadata_url(str(parsed)) == parsed


def test_connect_string() -> None:
    parsed = parse_metadata_url("zk://a:1,[::1]:2/x")
    assert parsed.connect_string == "a:1,[::1]:2"
    assert str(parsed) == "zk://a:1,[::1]:2/x"


@pytest.mark.parametrize(("url", "problem"), [
    ("", "empty"),
    ("127.0.0.1:2181/folio", "no scheme"),
    ("http://h:2181/folio", "unknown scheme 'http'"),
    ("zk:///folio", "no ZooKeeper server"),
    ("zk://h:2181", "no chroot"),
    ("zk://h:2181/", "no chroot"),
    ("zk://h:0/f", "port '0' is not in 1..65535"),
    ("zk://h:65536/f", "port '65536'"),
    ("zk://h:x/f", "port 'x'"),
    ("zk://h:/f", "port ''"),
    ("zk://:2181/f", "has no host"),
    ("zk://h:1,,g:2/f", "empty server"),
    ("zk://h:1,h:1/f", "named twice"),
    ("zk://h_1:2181/f", "not a host name"),
    ("zk://::1:2181/f", "more than one ':'"),
    ("zk://[::1/f", "bad IPv6"),
    ("zk://[::1]x/f", "unexpected 'x'"),
    ("zk://h:2181/f//g", "bad chroot"),
    ("zk://h:2181/f/", "bad chroot"),
    ("zk://h:2181/f?x=1", "query"),
    ("zk://u@h:2181/f", "user"),
    ("zk://h:2181/f#x", "fragment"),
])
def test_bad_urls_are_named(url: str, problem: str) -> None:
    with pytest.raises(MetadataUrlError) as caught:
        parse_metadata_url(url)
    assert problem in str(caught.value)
    assert "expected zk://HOST:PORT" in str(caught.value)
    # Both a ledger error and a ValueError (the settings layer's usage errors).
    assert isinstance(caught.value, InvalidArgumentError)
    assert isinstance(caught.value, ValueError)


def test_the_ledger_reads_its_own_fields_of_the_record() -> None:
    written = ClusterLayout(container_count=8, ensemble_size=5, write_quorum=3, ack_quorum=2)
    assert LedgerLayout.decode(written.encode()) == LedgerLayout(5, 3, 2)
    # Another layer's fields are not the ledger's business; its own must be there.
    assert LedgerLayout.decode(
        b'{"format_version": 1, "ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}'
    ) == LedgerLayout(1, 1, 1)
    with pytest.raises(MetadataError, match="bad layout record"):
        LedgerLayout.decode(b'{"format_version": 1, "container_count": 4}')
    with pytest.raises(ValueError):
        LedgerLayout(ensemble_size=2, write_quorum=3)


def test_paths_and_registrations() -> None:
    assert CLUSTER_PATH == "/cluster"
    assert LEDGERS_PATH == "/ledgers"
    assert bookie_available_path("h:1") == f"{BOOKIES_AVAILABLE_PATH}/h:1"
    assert bookie_all_path("h:1") == f"{BOOKIES_ALL_PATH}/h:1"
    assert broker_path("h:2") == f"{BROKERS_PATH}/h:2"
    assert set(PARENT_PATHS) >= {BOOKIES_AVAILABLE_PATH, BOOKIES_ALL_PATH, BROKERS_PATH}
    for bad in ("", "a/b", ".."):
        with pytest.raises(ValueError):
            broker_path(bad)
    record = Registration(address="h:2", started_at_ms=5, version="0.1.0")
    assert Registration.decode("/brokers/h:2", record.encode()) == record
    with pytest.raises(MetadataError, match="bad registration"):
        Registration.decode("/brokers/x", b'{"format_version": 1, "address": 3}')


def test_cluster_config() -> None:
    assert not ClusterConfig().enabled
    config = ClusterConfig(metadata_url="zk://h:2181/f", advertised_address="pub:7070")
    assert config.enabled and config.url() == "zk://h:2181/f"
    assert config.address("127.0.0.1", 1) == "pub:7070"
    assert ClusterConfig(metadata_url="zk://h/f").address("0.0.0.0", 9) == "0.0.0.0:9"
    with pytest.raises(ValueError, match="no chroot"):
        ClusterConfig(metadata_url="zk://h:2181")
    with pytest.raises(ValueError, match="needs metadata_url"):
        ClusterConfig(advertised_address="h:1")
    with pytest.raises(ValueError, match="not host:port"):
        ClusterConfig(metadata_url="zk://h/f", advertised_address="h")
    with pytest.raises(ValueError, match="positive"):
        ClusterConfig(metadata_url="zk://h/f", metadata_session_timeout_ms=0)
