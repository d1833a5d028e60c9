"""Helpers shared by tests: real processes and servers, started and stopped with deadlines."""
