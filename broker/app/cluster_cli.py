"""``folio cluster init`` and ``folio cluster describe``: a cluster's layout in its metadata.

The metadata URL picks the store (``ledger.metadata.stores``: ``zk://`` for a
cluster's ZooKeeper chroot, ``rocksdb:///PATH`` for the embedded store of one
process); an unknown scheme is a usage error naming the known ones.
``init`` writes the cluster's layout once under the metadata URL's chroot
(creating the chroot, or the directory, if needed), as BookKeeper's ``initnewcluster`` does: the
``/cluster`` record (format version, container count, default ledger quorums)
and the base paths of ``ledger.metadata.cluster_layout``. It is idempotent:
run again with the same values it says the cluster exists and exits 0; with
other values it exits 1 naming each difference (the layout never changes
once written). ``describe`` prints the layout, the live bookies (and those
registered once but gone), the live brokers, which broker owns each segment
container (``broker.app.cluster_containers``) and the ledgers auto-recovery
has yet to re-replicate; ``--json`` prints the same as one JSON object.

``folio.cli`` loads ``cluster_command`` through the ``folio.commands``
entry-point group. The metadata URL may also come from
``FOLIO_CLUSTER_METADATA_URL``. Exit codes: 0 done, 1 failure (ZooKeeper
unreachable, conflicting layout, not initialised), 2 bad arguments (a bad URL
or an unknown scheme among them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

__all__ = ["ENV_METADATA_URL", "cluster_command"]

#: The environment variable that gives ``--metadata-url`` a default.
ENV_METADATA_URL = "FOLIO_CLUSTER_METADATA_URL"
_PROG = "folio cluster"


def _error(command: str, message: str, code: int = 1) -> int:
    print(f"{_PROG} {command}: error: {message}", file=sys.stderr, flush=True)
    return code


def _url(args: argparse.Namespace) -> str | None:
    url = args.metadata_url or os.environ.get(ENV_METADATA_URL) or None
    return url if isinstance(url, str) else None


def _run_init(args: argparse.Namespace) -> int:
    # Imported here so `folio --help` stays fast and works without kazoo.
    from broker.cluster.layout import ClusterLayout  # noqa: PLC0415
    from ledger.metadata.stores import check_store_url  # noqa: PLC0415

    url_text = _url(args)
    if url_text is None:
        return _error("init", f"--metadata-url (or {ENV_METADATA_URL}) is required", 2)
    try:
        url = check_store_url(url_text)
        layout = ClusterLayout(container_count=args.container_count,
                               ensemble_size=args.ensemble_size,
                               write_quorum=args.write_quorum, ack_quorum=args.ack_quorum)
    except ValueError as error:  # MetadataUrlError is one
        return _error("init", str(error), 2)
    return asyncio.run(_init(url, layout, args.connect_timeout_ms))


def _describe_layout(layout: Any) -> str:
    return (f"{layout.container_count} segment containers, default ledger quorums "
            f"E={layout.ensemble_size} Qw={layout.write_quorum} Qa={layout.ack_quorum}")


async def _init(url: str, layout: Any, connect_timeout_ms: int) -> int:
    from broker.cluster.layout import init_cluster  # noqa: PLC0415
    from ledger.errors import MetadataError  # noqa: PLC0415
    from ledger.metadata.stores import open_store  # noqa: PLC0415

    try:
        store = await open_store(url, create=True, connect_timeout_ms=connect_timeout_ms)
    except MetadataError as error:
        return _error("init", str(error))
    try:
        created, existing = await init_cluster(store, layout)
    except MetadataError as error:
        return _error("init", str(error))
    finally:
        await store.close()
    if created:
        print(f"initialised cluster at {url}: {_describe_layout(layout)}")
        return 0
    differences = layout.differences(existing)
    if differences:
        return _error("init", f"a cluster with another layout exists at {url} "
                              f"({_describe_layout(existing)}); a layout never changes: "
                              f"{'; '.join(f'asked {d}' for d in differences)}")
    print(f"cluster at {url} exists already with this layout: {_describe_layout(existing)}")
    return 0


def _run_describe(args: argparse.Namespace) -> int:
    url_text = _url(args)
    if url_text is None:
        return _error("describe", f"--metadata-url (or {ENV_METADATA_URL}) is required", 2)
    from ledger.metadata.metadata_url import MetadataUrlError  # noqa: PLC0415
    from ledger.metadata.stores import check_store_url  # noqa: PLC0415

    try:
        url = check_store_url(url_text)
    except MetadataUrlError as error:
        return _error("describe", str(error), 2)
    return asyncio.run(_describe(url, args.json, args.connect_timeout_ms))


async def _describe(url: str, as_json: bool, connect_timeout_ms: int) -> int:
    from broker.app.cluster_containers import container_owners, describe_owners  # noqa: PLC0415
    from broker.cluster.layout import BROKERS_PATH, read_layout  # noqa: PLC0415
    from ledger.autorecovery.marks import UnderReplicationMarks  # noqa: PLC0415
    from ledger.errors import MetadataError  # noqa: PLC0415
    from ledger.metadata.cluster_layout import (  # noqa: PLC0415
        BOOKIES_ALL_PATH,
        BOOKIES_AVAILABLE_PATH,
    )
    from ledger.metadata.registration import live_registrations  # noqa: PLC0415
    from ledger.metadata.stores import open_store  # noqa: PLC0415

    try:
        store = await open_store(url, connect_timeout_ms=connect_timeout_ms)
    except MetadataError as error:
        return _error("describe", str(error))
    try:
        layout = await read_layout(store)
        live = await live_registrations(store, BOOKIES_AVAILABLE_PATH)
        known = await live_registrations(store, BOOKIES_ALL_PATH)
        brokers = await live_registrations(store, BROKERS_PATH)
        under_replicated = await UnderReplicationMarks(store).ledger_ids()
        owners = await container_owners(store, layout.container_count)
    except MetadataError as error:
        return _error("describe", str(error))
    finally:
        await store.close()
    gone = sorted(set(known) - set(live))
    if as_json:
        print(json.dumps({
            "metadata_url": url,
            "layout": {"container_count": layout.container_count,
                       "ensemble_size": layout.ensemble_size,
                       "write_quorum": layout.write_quorum, "ack_quorum": layout.ack_quorum},
            "bookies": {"live": {name: reg.address for name, reg in sorted(live.items())},
                        "gone": gone},
            "brokers": {name: reg.address for name, reg in sorted(brokers.items())},
            "under_replicated_ledgers": under_replicated,
            "containers": [{"container": n, "owner": o.broker_id if o else None,
                            "address": o.address if o else None}
                           for n, o in enumerate(owners)],
        }, indent=2))
        return 0
    print(f"cluster at {url}: {_describe_layout(layout)}")
    print(f"live bookies ({len(live)}): "
          + (", ".join(reg.address for _, reg in sorted(live.items())) or "none"))
    if gone:
        print(f"gone bookies ({len(gone)}, registered once, not live): {', '.join(gone)}")
    print(f"live brokers ({len(brokers)}): "
          + (", ".join(reg.address for _, reg in sorted(brokers.items())) or "none"))
    for line in describe_owners(owners):
        print(line)
    if under_replicated:
        shown = ", ".join(str(ledger_id) for ledger_id in under_replicated[:20])
        more = f" and {len(under_replicated) - 20} more" if len(under_replicated) > 20 else ""
        print(f"under-replicated ledgers ({len(under_replicated)}, auto-recovery at work): "
              f"{shown}{more}")
    return 0


def _url_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metadata-url", metavar="URL",
        help="the cluster's metadata: its ZooKeeper chroot, "
        "zk://HOST:PORT[,HOST:PORT...]/CHROOT, or an embedded store, rocksdb:///PATH "
        f"(also {ENV_METADATA_URL})")
    parser.add_argument("--connect-timeout-ms", type=int, default=15_000, metavar="MS",
                        help="give up if no ZooKeeper server answers within this (default "
                        "15000)")


def cluster_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio cluster init`` and ``folio cluster describe``."""
    parser = subparsers.add_parser(
        "cluster", help="initialise or describe a cluster on ZooKeeper",
        description="Manage the layout of a Folio cluster whose metadata is in a ZooKeeper "
        "chroot (docs/cluster.md). `init` once, before any broker or bookie joins.")
    commands = parser.add_subparsers(dest="cluster_command", metavar="COMMAND", required=True)
    init = commands.add_parser(
        "init", help="write the cluster's layout once (idempotent)",
        description="Write the cluster's layout under the chroot (created if missing): the "
        "number of segment containers and the default ledger quorums, and the base paths. "
        "Run again with the same values it says so and exits 0; with other values it exits "
        "1 naming the conflict (a layout never changes).")
    _url_argument(init)
    init.add_argument("--container-count", type=int, default=16, metavar="N",
                      help="segment containers: a segment belongs to the container its name "
                      "hashes to, and brokers share containers (default 16; fixed for the "
                      "cluster's life)")
    init.add_argument("--ensemble-size", type=int, default=3, metavar="E",
                      help="default bookies each ledger is striped over (default 3)")
    init.add_argument("--write-quorum", type=int, default=2, metavar="QW",
                      help="default copies of each entry (default 2)")
    init.add_argument("--ack-quorum", type=int, default=2, metavar="QA",
                      help="default copies durable before an append is acknowledged "
                      "(default 2)")
    init.set_defaults(func=_run_init)
    describe = commands.add_parser(
        "describe", help="print the layout, live bookies and live brokers",
        description="Print the cluster's layout, its live bookies (and those registered "
        "once that are gone), its live brokers with the addresses clients use, and the "
        "under-replicated ledgers auto-recovery has yet to restore.")
    _url_argument(describe)
    describe.add_argument("--json", action="store_true", help="print one JSON object")
    describe.set_defaults(func=_run_describe)
