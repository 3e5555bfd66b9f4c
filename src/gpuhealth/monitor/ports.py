"""The InfiniBand/RoCE ports beside the GPUs, read by the monitor once a minute (issue 23 item 7).

`check` (GH720-GH722) judges the ports as they are: their state, and error counters that count since the driver
loaded. Whether those counters still grow is the monitor's: this reads `/sys/class/infiniband/<device>/ports/<n>/`
(state and counters/, through the host seam, the same reader as `check`'s) every ``every_s`` of the monitor's
clock, never per GPU sample, and leaves the devices of `[check] ib_exclude` unread. The correlation table
(knowledge/correlations.csv, rows of scope `same_port`) turns the rises into alerts: `link_downed` rising is a
link flap; the other counters are recorded in the history only (shadow rows), as no document we found gives a
rate of symbol or receive errors that means a fault.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

EVERY_S = 60.0  # [monitor] ports_every's default: a flap is a matter of minutes; a read is a dozen small files per port


class PortWatch:
    """Reads the ports when due; ``poll(now)`` gives [(port "mlx5_0/1", {counter: value})] or None when not due.
    A host with no RDMA device costs one directory listing per read."""

    def __init__(self, host: Any, exclude: Collection[str] = (), every_s: float = EVERY_S,
                 log: Callable[[str], None] | None = None) -> None:
        self.host = host
        self.exclude = frozenset(exclude)
        self.every_s = every_s
        self._log = log
        self._read_at: float | None = None
        self._said: str | None = None
        self.reads = 0

    def poll(self, now: float) -> list[tuple[str, dict[str, int]]] | None:
        if self._read_at is not None and now - self._read_at < self.every_s:
            return None
        self._read_at = now
        from gpuhealth.collect.hostside import infiniband_ports

        self.reads += 1
        ports, _excluded, why = infiniband_ports(self.host, self.exclude)
        if ports is None:
            if why != self._said and self._log is not None:  # said once, not once a minute
                self._log(f"InfiniBand ports not read: {why}")
            self._said = why
            return []
        return [(f"{p.device}/{p.port}", dict(p.counters)) for p in ports]
