"""Benchmark smoke tests: each harness run in a tiny bounded mode, its report shape checked."""
