"""Generated protocol stubs (scripts/gen_protos.py)."""
