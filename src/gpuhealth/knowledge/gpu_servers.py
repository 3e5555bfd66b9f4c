"""Machines whose firmware name says they have NVIDIA GPUs, from ``gpu_servers.csv`` (read on first use).

A row is a DMI vendor (``/sys/class/dmi/id/sys_vendor``, compared whole, any case) and a product line, a word that
the product name or the product family holds (any case): ``NVIDIA``, ``DGX`` matches "NVIDIA DGX-2" and a family
"DGX". GH101 reads it: no NVIDIA GPU on the bus of such a machine means its GPUs left the bus, not a machine built
without them. Each row names its source.
"""

from __future__ import annotations

import functools

from gpuhealth.knowledge import table_rows

__all__ = ["gpu_server"]


@functools.cache
def _rows() -> tuple[tuple[str, str], ...]:
    rows = []
    for row in table_rows("gpu_servers.csv"):
        if not row["vendor"].strip() or not row["product"].strip() or not row["source"].strip():
            raise ValueError(f"gpu_servers.csv: a row names a vendor, a product line and its source: {row}")
        rows.append((row["vendor"].strip().lower(), row["product"].strip().lower()))
    return tuple(rows)


def _words(text: str | None) -> set[str]:
    return set("".join(c if c.isalnum() else " " for c in (text or "").lower()).split())


def gpu_server(vendor: str | None, product: str | None, family: str | None) -> str | None:
    """The machine in words ("NVIDIA DGX-2") when its firmware names a machine built with NVIDIA GPUs, else None."""
    if not vendor:
        return None
    names = _words(product) | _words(family)
    for known_vendor, line in _rows():
        if vendor.strip().lower() == known_vendor and line in names:
            name = (product or family or "").strip()
            return name if name.lower().startswith(known_vendor) else f"{vendor.strip()} {name}"
    return None
