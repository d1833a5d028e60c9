"""Integration tests: real servers on loopback ports, real RocksDB in temporary dirs."""
