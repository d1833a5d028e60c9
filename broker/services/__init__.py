"""The gRPC servicers: decode a request, call the domain, encode the reply or the error.

Also the server that registers them, with health, reflection and the checks
every request passes (decodable, name lengths) before a servicer sees it.
"""

__all__: list[str] = []
