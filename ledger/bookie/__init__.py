"""One bookie: its RocksDB storage, the in-process Bookie, its gRPC service and main."""

__all__: list[str] = []
