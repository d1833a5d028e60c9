"""Unit tests of the Folio SDK (folio/)."""
