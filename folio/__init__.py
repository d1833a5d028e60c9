"""Folio's Python SDK and CLI.

The SDK speaks only the public gRPC protocol (stubs in ``folio.api``); it never
imports the server packages. The client arrives with the broker-core issue.
"""

__all__: list[str] = []
