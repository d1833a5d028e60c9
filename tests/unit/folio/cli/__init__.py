"""Unit tests of folio/cli/."""
