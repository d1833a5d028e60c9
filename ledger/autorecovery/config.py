"""Auto-recovery settings of ``folio bookie`` (and of ``folio autorecovery``).

Layered by ``ledger.settings`` like every other setting (``folio
autorecovery`` reads ``FOLIO_AUTORECOVERY_*`` and an ``[autorecovery]`` table
instead): ``--auto-recovery`` /
``--no-auto-recovery``, ``--auto-recovery-grace-ms``,
``--auto-recovery-interval-ms``, ``--auto-recovery-token-file``,
``FOLIO_BOOKIE_AUTO_RECOVERY_GRACE_MS``, or the same keys in the ``[bookie]``
table of a ``--config`` file. How the worker reaches the other bookies
securely is in ``ledger.autorecovery.security``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.config import check_port

__all__ = ["DEFAULT_GRACE_MS", "DEFAULT_INTERVAL_MS", "AutoRecoveryConfig",
           "AutoRecoveryListenConfig"]

#: A bookie missing from the live ones this long is lost for good (BookKeeper's
#: ``lostBookieRecoveryDelay`` plays the same part). Long enough for a restart.
DEFAULT_GRACE_MS = 30_000
#: How often a worker audits (if it is the auditor) and looks for marked ledgers.
DEFAULT_INTERVAL_MS = 5_000


@dataclass(frozen=True)
class AutoRecoveryConfig:
    """Whether and how a bookie of a cluster runs an auto-recovery worker.

    Attributes:
        auto_recovery: run the worker (only in a cluster: with a metadata URL).
        auto_recovery_grace_ms: how long a registered bookie may be missing
            from the live ones before its ledgers are re-replicated.
        auto_recovery_interval_ms: the worker's period: one audit (by the
            elected auditor) and one look at the marked ledgers per period.
        auto_recovery_token_file: the JWT the in-bookie worker sends to the
            other bookies when they check tokens (its role must be in their
            ``super_users``); ``folio autorecovery`` takes
            ``--bookie-token-file`` instead.
    """

    auto_recovery: bool = True
    auto_recovery_grace_ms: int = DEFAULT_GRACE_MS
    auto_recovery_interval_ms: int = DEFAULT_INTERVAL_MS
    auto_recovery_token_file: str = ""

    def __post_init__(self) -> None:
        if self.auto_recovery_grace_ms < 0:
            raise ValueError("auto_recovery_grace_ms must be >= 0, got "
                             f"{self.auto_recovery_grace_ms}")
        if self.auto_recovery_interval_ms <= 0:
            raise ValueError("auto_recovery_interval_ms must be positive, got "
                             f"{self.auto_recovery_interval_ms}")


@dataclass(frozen=True)
class AutoRecoveryListenConfig:
    """Where ``folio autorecovery`` (a worker in a process of its own) serves its metrics.

    Attributes:
        host: address of ``/metrics``.
        metrics_port: its port, 0 for any free one.
    """

    host: str = "127.0.0.1"
    metrics_port: int = 8010

    def __post_init__(self) -> None:
        check_port("metrics_port", self.metrics_port)
