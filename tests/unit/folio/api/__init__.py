"""Unit tests of folio/api/."""
