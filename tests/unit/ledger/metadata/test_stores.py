"""The store registry (``ledger.metadata.stores``): URLs checked, schemes chosen, errors named.

Each known scheme opening and round-tripping is in test_store_contract.py (the
whole MetadataStore contract runs on stores opened by URL); here: what the
registry refuses, and the embedded store's ``create``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.errors import InvalidArgumentError, MetadataError
from ledger.metadata.cluster_config import ClusterConfig
from ledger.metadata.metadata_url import MetadataUrlError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from ledger.metadata.stores import (
    SCHEMES,
    UnknownSchemeError,
    check_store_url,
    open_store,
    scheme_of,
)


@pytest.mark.parametrize("url", ["http://h/f", "file:///tmp/x", "ZooKeeper://h/f"])
def test_an_unknown_scheme_names_the_known_ones(url: str) -> None:
    with pytest.raises(UnknownSchemeError) as caught:
        check_store_url(url)
    message = str(caught.value)
    assert f"unknown scheme {url.partition(':')[0]!r}" in message
    assert "zk:// (zk://HOST:PORT[,HOST:PORT...]/CHROOT)" in message
    assert "rocksdb:// (rocksdb:///ABSOLUTE/PATH)" in message
    # A usage error for the settings layer, and a ledger error for callers.
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, InvalidArgumentError)


async def test_open_refuses_an_unknown_scheme_before_touching_anything(tmp_path: Path) -> None:
    with pytest.raises(UnknownSchemeError, match="known schemes: zk://"):
        await open_store(f"file://{tmp_path}")
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 (a test's tmp dir)


@pytest.mark.parametrize(("url", "problem"), [
    ("", "empty"),
    ("   ", "empty"),
    ("/var/lib/folio", "no scheme"),
    ("://h/f", "no scheme"),
])
def test_no_scheme(url: str, problem: str) -> None:
    with pytest.raises(MetadataUrlError, match=problem) as caught:
        check_store_url(url)
    assert "known schemes" in str(caught.value)


@pytest.mark.parametrize(("url", "problem"), [
    ("rocksdb://relative/path", "must be absolute"),
    ("rocksdb://", "must be absolute"),
    ("rocksdb:///", "no directory"),
    ("zk://h:2181", "no chroot"),
    ("zk://h:99999/f", "not in 1..65535"),
])
def test_each_scheme_checks_its_own_rules(url: str, problem: str) -> None:
    with pytest.raises(MetadataUrlError, match=problem):
        check_store_url(url)


@pytest.mark.parametrize(("url", "canonical"), [
    ("zk://h/f", "zk://h:2181/f"),
    ("ZK://h:1,h:2/f/g", "zk://h:1,h:2/f/g"),
    ("rocksdb:///var/lib/../lib/folio/", "rocksdb:///var/lib/folio"),
    (" rocksdb:///a ", "rocksdb:///a"),
    ("rocksdb:///data #2/m?", "rocksdb:///data #2/m?"),  # the path as given, no query
])
def test_canonical_forms(url: str, canonical: str) -> None:
    assert check_store_url(url) == canonical
    assert scheme_of(url).name == canonical.partition(":")[0]


def test_cluster_config_checks_its_url_through_the_registry() -> None:
    assert ClusterConfig(metadata_url="rocksdb:///m").url() == "rocksdb:///m"
    assert ClusterConfig(metadata_url="zk://h/f").url() == "zk://h:2181/f"
    with pytest.raises(ValueError, match="unknown scheme 'etcd'"):
        ClusterConfig(metadata_url="etcd://h/f")


async def test_rocksdb_without_create_needs_the_directory(tmp_path: Path) -> None:
    url = f"rocksdb://{tmp_path / 'metadata'}"
    with pytest.raises(MetadataError, match=r"no metadata store at .*folio cluster init"):
        await open_store(url)
    assert not (tmp_path / "metadata").exists()
    store = await open_store(url, create=True)
    try:
        assert isinstance(store, RocksDBMetadataStore)
        await store.create("/a/b", b"kept", make_parents=True)
    finally:
        await store.close()
    reopened = await open_store(url)  # exists now: create is not needed
    try:
        assert (await reopened.get("/a/b")).data == b"kept"
    finally:
        await reopened.close()


def test_the_registry_lists_its_rows_by_name() -> None:
    assert all(name == row.name and row.form.startswith(f"{name}://")
               for name, row in SCHEMES.items())
