"""Unit tests of folio/_flow/ (the one append-flow engine and its policies)."""
