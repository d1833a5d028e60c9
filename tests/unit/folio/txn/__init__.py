"""Unit tests of folio/txn/."""
