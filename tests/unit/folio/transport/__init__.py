"""Unit tests of folio/_transport/."""
