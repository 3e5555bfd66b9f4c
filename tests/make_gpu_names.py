"""Build ``src/gpuhealth/knowledge/gpu_names.csv``: GPU model names (as ``nvidia-smi -L`` prints them) to PCI IDs.

Run from the repository root: ``python tests/make_gpu_names.py`` (``test_recommend`` checks that the committed
table is what this script makes). Sources, in order of precedence, the first to name a model wins:

1. names taken from real ``nvidia-smi -q`` captures (the rows of the committed table whose source says so);
2. NVIDIA's own product names with their PCI device IDs: the "Compatible GPUs" table of the
   open-gpu-kernel-modules README (Turing and newer; tests/data/corpus/open-gpu-kernel-modules);
3. the bracketed model names of pci.ids (tests/data/corpus/pciids), for the older GPUs the README does not
   list (Kepler to Volta); only device IDs that ``knowledge/gpus.csv`` places in an architecture.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "src/gpuhealth/knowledge/gpu_names.csv"
README = REPO / "tests/data/corpus/open-gpu-kernel-modules/README-compatible-gpus-595.45.04.md"
PCIIDS = REPO / "tests/data/corpus/pciids/pci.ids.nvidia-10de-excerpt"
README_SOURCE = ("NVIDIA, open-gpu-kernel-modules 595.45.04 README, Compatible GPUs "
                 "<https://github.com/NVIDIA/open-gpu-kernel-modules/blob/595.45.04/README.md>")
NOT_A_GPU = re.compile(r"NVSwitch|Audio|USB|Controller|Bridge", re.IGNORECASE)  # functions and switches
PCIIDS_SOURCE = "pci.ids 2026.08.22 <https://github.com/pciutils/pciids>"


def name_key(name: str) -> str:
    sys.path.insert(0, str(REPO / "src"))
    from gpuhealth.knowledge.gpus import _name_key

    return _name_key(name)


def captured_rows() -> list[tuple[str, str, str]]:
    with TABLE.open(encoding="utf-8", newline="") as handle:
        return [(r["name"], r["device_id"], r["source"]) for r in csv.DictReader(handle)
                if r["source"].startswith("nvidia-smi -q capture")]


def readme_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in README.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| (\S.*?\S)\s+\| ([0-9A-F]{4})(?: [0-9A-F]{4} [0-9A-F]{4})?\s+\|$", line)
        if match and match[1] != "Product Name":
            rows.append((match[1], match[2].lower(), README_SOURCE))
    return rows


def pciids_rows() -> list[tuple[str, str, str]]:
    sys.path.insert(0, str(REPO / "src"))
    from gpuhealth.knowledge import gpus

    text = PCIIDS.read_text(encoding="utf-8", errors="replace")
    block = text.split("\n10de  NVIDIA Corporation\n", 1)[1]
    rows = []
    for line in block.splitlines():
        if line and not line.startswith(("\t", "#")):
            break  # the next vendor
        match = re.match(r"^\t([0-9a-f]{4})  \S+ \[(.+)\]$", line)
        if match and gpus.lookup(match[1]) is not None and not NOT_A_GPU.search(match[2]):
            rows.append((match[2], match[1], f"{PCIIDS_SOURCE} ({match[1]})"))
    return rows


def build() -> str:
    seen: set[tuple[str, str]] = set()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("name", "device_id", "source"))
    for name, device_id, source in captured_rows() + readme_rows() + pciids_rows():
        if (name_key(name), device_id) in seen:
            continue
        seen.add((name_key(name), device_id))
        writer.writerow((name, device_id, source))
    return out.getvalue()


if __name__ == "__main__":
    TABLE.write_text(build(), encoding="utf-8")
    sys.stdout.write(f"{TABLE}: {TABLE.read_text(encoding='utf-8').count(chr(10)) - 1} rows\n")
