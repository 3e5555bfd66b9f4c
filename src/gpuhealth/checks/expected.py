"""What this host should have, and where that expectation comes from: the configuration first, else the platform
the machine is (knowledge/platforms.csv: a DGX model by its firmware's product name, a cloud instance type by the
firmware's product name on AWS or by ``[check] instance_type``).

Checks quote the origin in their findings ("8 expected: NVIDIA DGX H100 (NVIDIA DGX BasePOD Reference
Architecture)"), so a reader can tell a configured number from one taken from a document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuhealth.checks.registry import Expectations
from gpuhealth.model import Snapshot

if TYPE_CHECKING:
    from gpuhealth.knowledge.platforms import Platform

__all__ = ["expected", "platform_of"]


def platform_of(snapshot: Snapshot, expect: Expectations) -> Platform | None:
    """The row of knowledge/platforms.csv this host is: the configured instance type first (it names the VM
    exactly), else the firmware's product name; None when neither is known or listed."""
    product = snapshot.os.machine_product if snapshot.os is not None else None
    if not expect.instance_type and not product:
        return None
    from gpuhealth.knowledge.platforms import lookup  # read only for a host with a name to look up

    return lookup(expect.instance_type, product)


def expected(snapshot: Snapshot, expect: Expectations, key: str) -> tuple[int | None, str]:
    """(value, where it comes from) for a host-wide ``key`` (gpu_count, ib_port_count, ib_rate_gbps,
    nvlink_count): ``[check] key``, else the platform's value; (None, "") when neither is known."""
    configured = getattr(expect, key, None)
    if configured is not None:
        return configured, f"config [check] {key}"
    platform = platform_of(snapshot, expect)
    if platform is not None and platform.get(key) is not None:
        return platform.get(key), platform.origin
    return None, ""
