"""Runnable examples (``python -m examples.clickcount``)."""
