"""``folio`` whose Kafka connections are the role their client id names: TEST ONLY.

Run as ``python -m tests.support.kafka_roles standalone ARGS`` (the ``module``
argument of ``start_standalone``): the same command, except that each Kafka
request whose connection authenticated no one gets ``Principal(client_id)``
(no client id: none). It stands in for SASL, which sets ``call.principal``
for real, so the authorisation tests can be many roles at once without
credentials. The patch lives here, in the test's own launcher, never in the
broker: a broker started as ``folio`` has no such path.
"""

from __future__ import annotations

import dataclasses
import sys

from broker.kafka.connection import KafkaConnection
from broker.kafka.dispatch import Call
from folio.cli import main
from ledger.security.tokens import Principal

_decode = KafkaConnection._decode


def _decode_as_client_id(self: KafkaConnection, api_key: int, version: int,
                         data: bytes) -> Call:
    call = _decode(self, api_key, version, data)
    if call.principal is None and call.client_id:
        return dataclasses.replace(call, principal=Principal(call.client_id))
    return call


KafkaConnection._decode = _decode_as_client_id  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
