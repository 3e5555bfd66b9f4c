"""Written by gpuhealth.knowledge.write_tables(): gpu_servers.csv pre-parsed (see knowledge.table_rows).
Do not edit: `make tables` rewrites it; tests/test_knowledge.py checks that it is current."""
# ruff: noqa
# fmt: off

TEXT = 'vendor,product,source\nNVIDIA,DGX,"lablup/backend.ai issue #113, an NVIDIA DGX-2\'s DMI system information (Manufacturer: NVIDIA, Product Name: NVIDIA DGX-2, Family: DGX) <https://github.com/lablup/backend.ai/issues/113>; NVIDIA, DGX Systems documentation (every DGX system is built around NVIDIA GPUs) <https://docs.nvidia.com/dgx/>"\n'

HEADER = ('vendor', 'product', 'source')

ROWS = (
    ('NVIDIA', 'DGX', "lablup/backend.ai issue #113, an NVIDIA DGX-2's DMI system information (Manufacturer: NVIDIA, Product Name: NVIDIA DGX-2, Family: DGX) <https://github.com/lablup/backend.ai/issues/113>; NVIDIA, DGX Systems documentation (every DGX system is built around NVIDIA GPUs) <https://docs.nvidia.com/dgx/>"),
)
