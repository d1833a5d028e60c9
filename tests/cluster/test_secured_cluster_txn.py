"""Transactions across the brokers of a secured cluster: the internal calls pass TLS and tokens.

Brokers serve TLS and check tokens; each calls the others (``BrokerInternal``,
proto/broker/v1/internal.proto) over TLS with ``--peer-tls-ca`` and the token of
``--peer-token-file``, whose role is one of their ``--super-users``. A client
role that is not a super-user gets PERMISSION_DENIED on the internal calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

import folio
from broker._proto.v1 import internal_pb2, internal_pb2_grpc
from broker.cluster.containers import container_of
from folio.api.v1 import admin_pb2, admin_pb2_grpc
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import Pki
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for

_BOOKIE_SECRET = b"bookie-secret-made-for-this-test-0123456789"
_BROKER_SECRET = b"broker-secret-made-for-this-test-0123456789"
COUNT = 8


def _token(role: str) -> str:
    return create_token(role, _BROKER_SECRET, "HS256")


def _channel(pki: Pki, address: str) -> grpc.Channel:
    ca = Path(pki.ca).read_bytes()
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=ca))


def _containers(pki: Pki, address: str) -> dict[int, str]:
    with _channel(pki, address) as channel:
        listed = admin_pb2_grpc.AdminStub(channel).ListBrokers(
            admin_pb2.ListBrokersRequest(), timeout=10,
            metadata=(("authorization", f"Bearer {_token('admin')}"),))
    return {c: b.address for b in listed.brokers for c in b.containers}


def _start(processes: BookieProcesses, url: str,
           base: Path) -> tuple[Pki, list[BookieProcess]]:
    pki = Pki(base / "pki")
    served = pki.server("server")
    bookie_secret, broker_secret = base / "bookie.secret", base / "broker.secret"
    bookie_secret.write_bytes(_BOOKIE_SECRET + b"\n")
    broker_secret.write_bytes(_BROKER_SECRET + b"\n")
    bookie_token, peer_token = base / "bookie.jwt", base / "peer.jwt"
    bookie_token.write_text(create_token("broker", _BOOKIE_SECRET, "HS256"))
    peer_token.write_text(_token("peer"))
    tls = ("--tls-cert", str(served.cert), "--tls-key", str(served.key))
    cluster = LocalCluster(processes, url, base)
    cluster.init(container_count=COUNT, ensemble_size=2, write_quorum=2, ack_quorum=2)
    for _ in range(2):
        cluster.start_bookie(*tls, "--auth-token-secret-file", str(bookie_secret),
                             "--super-users", "broker")
    brokers = [cluster.start_broker(
        *tls, "--auth-token-secret-file", str(broker_secret), "--super-users", "admin,peer",
        "--bookie-tls-ca", str(pki.ca), "--bookie-token-file", str(bookie_token),
        "--peer-tls-ca", str(pki.ca), "--peer-token-file", str(peer_token))
        for _ in range(2)]

    def spread() -> bool:
        try:
            return len(set(_containers(pki, brokers[0].address).values())) == 2
        except grpc.RpcError:
            return False

    wait_for(spread, "both brokers own containers", timeout_s=60)
    return pki, brokers


@pytest.mark.timeout(300)
def test_a_transaction_over_two_secured_brokers_commits_and_clients_cannot_call_internals(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    pki, brokers = _start(bookie_processes, zk_url, tmp_path)
    owners = _containers(pki, brokers[0].address)
    topic = next(f"sx{i}" for i in range(10_000)
                 if owners.get(container_of(f"sx{i}/0", COUNT))
                 != owners.get(container_of(f"sx{i}/1", COUNT)))
    endpoints = ",".join(b.address for b in brokers)
    tls = folio.TLS(ca=str(pki.ca))
    with folio.Client(endpoints, tls=tls, token=_token("admin"), timeout_s=30) as admin:
        admin.create_topic(topic, segments=2)
        admin.grant_permission("shop", topic, ["produce", "consume"])
    with folio.Client(endpoints, tls=tls, token=_token("shop"), timeout_s=30) as shop, \
            shop.transactional_writer(topic) as writer:
        txn = writer.begin()
        for i in range(20):
            txn.write_event(b"e%d" % i)  # keyless: over both segments, both brokers
        txn.commit()
        assert txn.status() == "COMMITTED"
        got: list[bytes] = []
        with shop.reader(topic, isolation="read_committed") as reader:
            deadline = time.monotonic() + 30
            while len(got) < 20 and time.monotonic() < deadline:
                event = reader.read_next(timeout=0.2)
                if event is not None:
                    got.append(event.payload)
        assert sorted(got) == sorted(b"e%d" % i for i in range(20))
        assert all(s.end_offset > 0 for s in shop.get_segments(topic))

    # The internal calls: a client role gets PERMISSION_DENIED; a super-user is let in
    # (and told where the coordinator is, or that the segment is not served there).
    request = internal_pb2.WriteTxnMarkerRequest(
        segment=f"{topic}/0", txn_id=bytes(range(1, 17)),
        outcome=internal_pb2.TXN_OUTCOME_ABORT)
    for broker in brokers:
        with _channel(pki, broker.address) as channel:
            stub = internal_pb2_grpc.BrokerInternalStub(channel)
            calls: tuple[tuple[Callable[..., object], object], ...] = (
                (stub.WriteTxnMarker, request),
                (stub.RegisterTxnSegment, internal_pb2.RegisterTxnSegmentRequest(
                    txn_id=bytes(range(1, 17)), segment=f"{topic}/0")))
            for call, message in calls:
                with pytest.raises(grpc.RpcError) as refused:
                    call(message, timeout=10,
                         metadata=(("authorization", f"Bearer {_token('shop')}"),))
                assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
                assert "super-user" in (refused.value.details() or "")
            with pytest.raises(grpc.RpcError) as refused:
                stub.RegisterTxnSegment(
                    internal_pb2.RegisterTxnSegmentRequest(txn_id=bytes(16), segment="x/0"),
                    timeout=10, metadata=(("authorization", f"Bearer {_token('peer')}"),))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # let in
