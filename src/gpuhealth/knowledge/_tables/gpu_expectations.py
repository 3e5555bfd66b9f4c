"""Written by gpuhealth.knowledge.write_tables(): gpu_expectations.csv pre-parsed (see knowledge.table_rows).
Do not edit: `make tables` rewrites it; tests/test_knowledge.py checks that it is current."""
# ruff: noqa
# fmt: off

TEXT = 'pattern,nvlink_count,pcie_width,source\nH100 80GB HBM3,18,16,"NVLink: ml-engineering/topo-m_8xH100_NV18.txt (NV18 between every pair of 8 H100 SXM); PCIe: gpud/accelerator_nvidia_query__nvidia-smi-query.535.161.08.out.0.valid (8x NVIDIA H100 80GB HBM3, Link Width Max 16x)"\nA100-SXM4,12,16,"NVLink: gpud/nvidia-query__nvidia-smi.nvlink.status.a100 (A100-SXM4-80GB, Link 0-11 at 25 GB/s) and ml-engineering/topo-m_8xA100_NV12.txt (NV12); PCIe: azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out (Link Width Max 16x)"\nV100-SXM2,6,,"NVLink: azhpc-diagnostics/nvlink-s_8xV100-SXM2_inactive-links.out (Tesla V100-SXM2-32GB, Link 0-5); PCIe width: no capture in the corpus, left unset"\nV100-PCIE,,16,"PCIe: azhpc-diagnostics/nvidia-smi-q_4xV100-PCIE_460.32.03.txt (Tesla V100-PCIE-16GB, Link Width Max 16x); no NVLink bridge in that capture, NVLink left unset"\n^NVIDIA A10$,,16,"PCIe: gpud/accelerator_nvidia_query__nvidia-smi-query.535.129.03.out.0.valid.a10 (NVIDIA A10, Link Width Max 16x)"\n'

HEADER = ('pattern', 'nvlink_count', 'pcie_width', 'source')

ROWS = (
    ('H100 80GB HBM3', '18', '16', 'NVLink: ml-engineering/topo-m_8xH100_NV18.txt (NV18 between every pair of 8 H100 SXM); PCIe: gpud/accelerator_nvidia_query__nvidia-smi-query.535.161.08.out.0.valid (8x NVIDIA H100 80GB HBM3, Link Width Max 16x)'),
    ('A100-SXM4', '12', '16', 'NVLink: gpud/nvidia-query__nvidia-smi.nvlink.status.a100 (A100-SXM4-80GB, Link 0-11 at 25 GB/s) and ml-engineering/topo-m_8xA100_NV12.txt (NV12); PCIe: azhpc-diagnostics/nvidia-smi-q_8xA100-SXM4-40GB_460.32.03.out (Link Width Max 16x)'),
    ('V100-SXM2', '6', '', 'NVLink: azhpc-diagnostics/nvlink-s_8xV100-SXM2_inactive-links.out (Tesla V100-SXM2-32GB, Link 0-5); PCIe width: no capture in the corpus, left unset'),
    ('V100-PCIE', '', '16', 'PCIe: azhpc-diagnostics/nvidia-smi-q_4xV100-PCIE_460.32.03.txt (Tesla V100-PCIE-16GB, Link Width Max 16x); no NVLink bridge in that capture, NVLink left unset'),
    ('^NVIDIA A10$', '', '16', 'PCIe: gpud/accelerator_nvidia_query__nvidia-smi-query.535.129.03.out.0.valid.a10 (NVIDIA A10, Link Width Max 16x)'),
)
