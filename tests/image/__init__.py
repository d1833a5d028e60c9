"""Tests of the built container image (marker ``image``; `make test-image`)."""
