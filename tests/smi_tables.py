"""An `nvidia-smi` table written by hand for tests (the layout of driver 535's output, one A100; the values are
made up): the tests that paste a table beside other evidence share it."""

from __future__ import annotations

_A100 = """\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-{size}GB          On  | 00000000:{bus}:00.0 Off |                    0 |
| N/A   {temp}C    P0              {watts}W / 400W |      4MiB / {mib}MiB |      0%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+"""


def a100_table(bus: str = "3B", size: int = 80, temp: int = 34, watts: int = 62) -> str:
    """The table for one A100 at PCI bus ``bus`` (two hex digits), 40 or 80 GB; widths stay nvidia-smi's."""
    mib = {40: "40960", 80: "81920"}[size]
    return _A100.format(bus=bus, size=size, temp=temp, watts=watts, mib=mib)
