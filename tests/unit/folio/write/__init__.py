"""Unit tests of folio/write/."""
