"""Generated stubs of the brokers' internal protocol (proto/broker/v1; scripts/gen_protos.py)."""
