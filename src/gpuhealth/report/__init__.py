"""Renderers: they only format a Report (shared helpers in common.py, the format list in formats.py)."""
