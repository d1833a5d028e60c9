"""Tests of ledger.autorecovery."""
