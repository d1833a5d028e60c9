"""Benchmarks: each reports ratios against the raw storage and peers run side by side."""
