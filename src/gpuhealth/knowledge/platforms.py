"""What a known machine model or cloud instance type has, from ``platforms.csv`` (read on first use).

A row is a platform (an NVIDIA DGX model, a cloud's GPU instance type) and what its vendor's document says it
has: GPUs, NVLinks per GPU, InfiniBand ports for the compute fabric and their rate. Columns:

- ``platform``: its name in findings ("NVIDIA DGX H100", "Azure Standard_ND96isr_H100_v5").
- ``match``: a regular expression searched (any case) in the firmware's product name
  (``/sys/class/dmi/id/product_name``: "DGXA100 920-23687-2531-001" on a DGX A100, the instance type itself,
  "m5.large", on an AWS Nitro instance; the DGX patterns allow "DGX H100", "DGX-H100" and "DGXH100" alike)
  or in the instance type the configuration names (``[check] instance_type``: Google Cloud and Azure VMs'
  firmware says only "Google Compute Engine" or "Virtual Machine", and their machine type is known only to the
  metadata server, which gpuhealth does not ask).
- ``gpu_count``, ``nvlink_count``, ``ib_port_count``, ``ib_rate_gbps``: empty where the document gives no number.
- ``network``: ``InfiniBand`` where ``ib_*`` apply; ``EFA`` (AWS's Elastic Fabric Adapter is not InfiniBand, and
  its ports are not judged against an IB count); empty where the document names no fabric.
- ``document``: the short title, quoted in findings, of what confirmed the values; ``source``: the pages checked
  against, titles and addresses (docs/configuration.md says what each number was checked against).

The configuration's own values override every value here (checks/expected.py).
"""

from __future__ import annotations

import functools
import re

from gpuhealth.knowledge import table_rows
from gpuhealth.lazyre import lazy_re
from gpuhealth.records import record

__all__ = ["Platform", "lookup", "table"]

NUMBERS = ("gpu_count", "nvlink_count", "ib_port_count", "ib_rate_gbps")


@record
class Platform:
    name: str
    gpu_count: int | None
    nvlink_count: int | None
    ib_port_count: int | None
    ib_rate_gbps: int | None
    network: str
    document: str
    source: str

    def get(self, key: str) -> int | None:
        value = getattr(self, key, None) if key in NUMBERS else None
        return value if isinstance(value, int) else None

    @property
    def origin(self) -> str:
        """Where an expectation taken from this row comes from, in a finding's words."""
        return f"{self.name} ({self.document})"


def _number(row: dict[str, str], key: str) -> int | None:
    text = row[key].strip()
    if not text:
        return None
    if not text.isdigit():
        raise ValueError(f"platforms.csv: {key} of {row['platform']} is not a whole number: {text!r}")
    return int(text)


@functools.cache
def table() -> tuple[tuple[re.Pattern[str], Platform], ...]:
    rows = []
    for row in table_rows("platforms.csv"):
        if not row["platform"].strip() or not row["match"].strip() or not row["source"].strip() \
                or not row["document"].strip():
            raise ValueError(f"platforms.csv: a row names a platform, its match, its document and source: {row}")
        platform = Platform(row["platform"].strip(), *(_number(row, key) for key in NUMBERS),
                            network=row["network"].strip(), document=row["document"].strip(),
                            source=row["source"].strip())
        if platform.network != "InfiniBand" and (platform.ib_port_count or platform.ib_rate_gbps):
            raise ValueError(f"platforms.csv: {platform.name}: InfiniBand ports on a {platform.network or 'no'} "
                             "network (EFA is not InfiniBand)")
        rows.append((lazy_re(row["match"].strip(), re.IGNORECASE), platform))
    return tuple(rows)


def lookup(*names: str | None) -> Platform | None:
    """The first row matching the first of ``names`` (an instance type, a product name) that any row matches."""
    for name in names:
        text = (name or "").strip()
        if not text:
            continue
        found = next((platform for pattern, platform in table() if pattern.search(text)), None)
        if found is not None:
            return found
    return None
