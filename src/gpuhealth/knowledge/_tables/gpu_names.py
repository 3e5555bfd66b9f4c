"""Written by gpuhealth.knowledge.write_tables(): gpu_names.csv pre-parsed (see knowledge.table_rows).
Do not edit: `make tables` rewrites it; tests/test_knowledge.py checks that it is current."""
# ruff: noqa
# fmt: off

TEXT = 'name,device_id,source\nNVIDIA H100 80GB HBM3,2330,nvidia-smi -q capture (gpud accelerator_nvidia_query 535.183.01: Product Name and Device Id 0x233010DE)\nNVIDIA H200,2335,nvidia-smi -q capture (nvidia-gpu-exporter linux-x86_64 nvidia-h200 590.48.01)\nNVIDIA L40S,26b9,nvidia-smi -q capture (nvidia-gpu-exporter linux-x86_64 nvidia-l40s 595.80)\nNVIDIA A10,2236,nvidia-smi -q capture (gpud accelerator_nvidia_query 535.129.03 a10)\nA100-SXM4-40GB,20b0,nvidia-smi -q capture (azhpc-diagnostics 8xA100-SXM4-40GB 460.32.03)\nNVIDIA A100-SXM4-80GB,20b2,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (20b2 GA100 [A100 SXM4 80GB])\nNVIDIA GeForce RTX 4090,2684,nvidia-smi -q capture (gpud accelerator_nvidia_query 535.154.05)\nNVIDIA GeForce RTX 4080 SUPER,2702,nvidia-smi -q capture (nvidia-gpu-exporter rtx-4080-super 595.71.05)\nNVIDIA GeForce RTX 2080 SUPER,1e81,nvidia-smi -q capture (nvidia-gpu-exporter rtx-2080-super 595.71.05)\nTesla T4,1eb8,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (1eb8 TU104GL [Tesla T4])\nTesla V100-PCIE-16GB,1db4,nvidia-smi -q capture (azhpc-diagnostics 4xV100-PCIE 460.32.03)\nNVIDIA TITAN V,1d81,nvidia-smi -q capture (gpud accelerator_nvidia_query 560.35.03)\nTesla P100 PCIe 16GB,15f8,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (15f8 GP100GL [Tesla P100 PCIe 16GB])\nGeForce GTX 1080 Ti,1b06,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (1b06 GP102 [GeForce GTX 1080 Ti])\nGeForce GTX TITAN X,17c2,nvidia-smi -q capture (nvidia-bug-report 352.63)\nTesla M60,13f2,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (13f2 GM204GL [Tesla M60])\nTesla K80,102d,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (102d GK210GL [Tesla K80])\nTesla K40m,1023,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (1023 GK110BGL [Tesla K40m])\nNVIDIA H100 PCIe,2331,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (2331 GH100 [H100 PCIe])\nNVIDIA L4,27b8,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (27b8 AD104GL [L4])\nNVIDIA RTX 6000 Ada Generation,26b1,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (26b1 AD102GL [RTX 6000 Ada Generation])\nNVIDIA B200,2901,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (2901 GB100 [B200])\nNVIDIA GeForce RTX 5090,2b85,pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (2b85 GB202 [GeForce RTX 5090])\n'

HEADER = ('name', 'device_id', 'source')

ROWS = (
    ('NVIDIA H100 80GB HBM3', '2330', 'nvidia-smi -q capture (gpud accelerator_nvidia_query 535.183.01: Product Name and Device Id 0x233010DE)'),
    ('NVIDIA H200', '2335', 'nvidia-smi -q capture (nvidia-gpu-exporter linux-x86_64 nvidia-h200 590.48.01)'),
    ('NVIDIA L40S', '26b9', 'nvidia-smi -q capture (nvidia-gpu-exporter linux-x86_64 nvidia-l40s 595.80)'),
    ('NVIDIA A10', '2236', 'nvidia-smi -q capture (gpud accelerator_nvidia_query 535.129.03 a10)'),
    ('A100-SXM4-40GB', '20b0', 'nvidia-smi -q capture (azhpc-diagnostics 8xA100-SXM4-40GB 460.32.03)'),
    ('NVIDIA A100-SXM4-80GB', '20b2', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (20b2 GA100 [A100 SXM4 80GB])'),
    ('NVIDIA GeForce RTX 4090', '2684', 'nvidia-smi -q capture (gpud accelerator_nvidia_query 535.154.05)'),
    ('NVIDIA GeForce RTX 4080 SUPER', '2702', 'nvidia-smi -q capture (nvidia-gpu-exporter rtx-4080-super 595.71.05)'),
    ('NVIDIA GeForce RTX 2080 SUPER', '1e81', 'nvidia-smi -q capture (nvidia-gpu-exporter rtx-2080-super 595.71.05)'),
    ('Tesla T4', '1eb8', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (1eb8 TU104GL [Tesla T4])'),
    ('Tesla V100-PCIE-16GB', '1db4', 'nvidia-smi -q capture (azhpc-diagnostics 4xV100-PCIE 460.32.03)'),
    ('NVIDIA TITAN V', '1d81', 'nvidia-smi -q capture (gpud accelerator_nvidia_query 560.35.03)'),
    ('Tesla P100 PCIe 16GB', '15f8', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (15f8 GP100GL [Tesla P100 PCIe 16GB])'),
    ('GeForce GTX 1080 Ti', '1b06', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (1b06 GP102 [GeForce GTX 1080 Ti])'),
    ('GeForce GTX TITAN X', '17c2', 'nvidia-smi -q capture (nvidia-bug-report 352.63)'),
    ('Tesla M60', '13f2', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (13f2 GM204GL [Tesla M60])'),
    ('Tesla K80', '102d', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (102d GK210GL [Tesla K80])'),
    ('Tesla K40m', '1023', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (1023 GK110BGL [Tesla K40m])'),
    ('NVIDIA H100 PCIe', '2331', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (2331 GH100 [H100 PCIe])'),
    ('NVIDIA L4', '27b8', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (27b8 AD104GL [L4])'),
    ('NVIDIA RTX 6000 Ada Generation', '26b1', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (26b1 AD102GL [RTX 6000 Ada Generation])'),
    ('NVIDIA B200', '2901', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (2901 GB100 [B200])'),
    ('NVIDIA GeForce RTX 5090', '2b85', 'pci.ids 2026.08.22 <https://github.com/pciutils/pciids> (2b85 GB202 [GeForce RTX 5090])'),
)
