"""DescribeLogDirs' volume sizes (v4+) at every served version, through kio's codec."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, cast

import pytest

from broker.api import Topics
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers.cluster_admin import (
    DESCRIBE_LOG_DIRS_KEY,
    handle_describe_log_dirs,
    volume_space,
)
from broker.kafka.messages import (
    build,
    decode_entity,
    encode_entity,
    request_class,
    response_class,
)
from broker.kafka.producer_ids import ProducerIds


class _NoTopics:
    async def list_topics(self) -> list[Any]:
        return []


def _context(ledger_dir: str | None = None) -> KafkaContext:
    # DescribeLogDirs lists the topics and never gives out producer ids.
    return KafkaContext(cast(Topics, _NoTopics()), "127.0.0.1", cast(ProducerIds, None),
                        port=9092, ledger_dir=ledger_dir)


async def _log_dir(context: KafkaContext, version: int) -> Any:
    cls = request_class(DESCRIBE_LOG_DIRS_KEY, version)
    answer = await handle_describe_log_dirs(
        context, Call(DESCRIBE_LOG_DIRS_KEY, version, 1, None, build(cls, topics=None)))
    response_cls = response_class(DESCRIBE_LOG_DIRS_KEY, version)
    out = io.BytesIO()
    encode_entity(response_cls, answer, out)
    decoded, size = decode_entity(response_cls, out.getvalue(), 0)
    assert size == len(out.getvalue())
    (result,) = decoded.results
    assert result.error_code.value == 0 and result.log_dir == "folio:ledgers"
    return result


@pytest.mark.parametrize("version", [4, 5])
async def test_describe_log_dirs_reports_the_ledger_dirs_volume(tmp_path: Path,
                                                                version: int) -> None:
    result = await _log_dir(_context(ledger_dir=str(tmp_path)), version)
    stats = os.statvfs(tmp_path)
    assert result.total_bytes == stats.f_blocks * stats.f_frsize > 0
    # Others write to the same disk meanwhile: usable is only bounded.
    assert 0 <= result.usable_bytes <= result.total_bytes
    unknown = await _log_dir(_context(), version)
    assert (unknown.total_bytes, unknown.usable_bytes) == (-1, -1)


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_describe_log_dirs_before_v4_has_no_sizes(tmp_path: Path, version: int) -> None:
    result = await _log_dir(_context(ledger_dir=str(tmp_path)), version)
    assert not hasattr(result, "total_bytes")


async def test_a_volume_that_cannot_be_read_is_unknown(tmp_path: Path) -> None:
    assert await volume_space(str(tmp_path / "gone")) == (-1, -1)
    assert await volume_space(None) == (-1, -1)
    total, usable = await volume_space(str(tmp_path))
    assert total > 0 and 0 <= usable <= total
