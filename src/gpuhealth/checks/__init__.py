"""Checks: pure functions over a Snapshot, each registered with a stable code (see registry.py)."""
