"""Fault tests: killed processes, refused ports, held locks."""
