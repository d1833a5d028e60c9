"""Unit tests of folio/read/."""
