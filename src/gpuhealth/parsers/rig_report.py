"""The "GPU hardware" lines of a club-3090 rig report (``bash scripts/report.sh`` of noonghunna/club-3090).

Owners of consumer multi-GPU rigs (RTX 3090/4090/5090) paste this markdown report into their issues; its
GPU section is nvidia-smi's data in the project's own words, one bullet per GPU with two sub-bullets::

    - **GPU 0:** NVIDIA GeForce RTX 3090 | 24576 MiB | driver 610.43.02 | VBIOS 94.02.42.80.88 | persistence=Enabled
      - **Power:** limit=250.00 W (default=370.00 W, max=390.00 W) | current_draw=144.23 W ⚠ user-capped below default
      - **PCIe:** x4 lanes negotiated (GPU max x16, Gen up to 4) | bus 00000000:05:00.0 ⚠ slot is narrower than ...

The "⚠" remarks are the report's own verdicts; only the values are read, the checks judge them. "Gen up to N"
is the GPU's maximum generation; the report prints no current generation (it is read at idle), so none is
taken. The rest of the report (system, disks, benchmarks, lspci blocks) is other evidence or none.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Gpu, ParseError, SmiReport, normalize_pci_address

TITLE = "club-3090 rig report"
MAX_GPUS = 64  # a rig report lists the GPUs of one host

_NUMBER = r"\d{1,6}(?:\.\d{1,4})?"
# Each pattern is anchored at a bullet and its parts are separated by fixed words: no nested quantifiers.
_GPU = lazy_re(r"^\s{0,8}[-*] \*\*GPU (?P<index>\d{1,3}):\*\* (?P<name>[^|\n]{1,120}?) \| (?P<mib>\d{1,7}) MiB"
               r"(?: \| driver (?P<driver>\d{1,4}(?:\.\d{1,4}){1,3}))?"
               r"(?: \| VBIOS (?P<vbios>[0-9A-Fa-f.]{1,40}))?(?: \| persistence=(?P<pm>\w{1,12}))?", re.M)
_POWER = lazy_re(rf"^\s{{0,12}}[-*] \*\*Power:\*\* limit=(?P<limit>{_NUMBER}) W \(default=(?P<default>{_NUMBER}) W"
                 rf"(?:, max={_NUMBER} W)?\)(?: \| current_draw=(?P<draw>{_NUMBER}) W)?", re.M)
_PCIE = lazy_re(r"^\s{0,12}[-*] \*\*PCIe:\*\* x(?P<width>\d{1,2}) lanes negotiated \(GPU max x(?P<width_max>\d{1,2})"
                r"(?:, Gen up to (?P<gen_max>\d{1,2}))?\)(?: \| bus (?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:"
                r"[0-9A-Fa-f]{2}\.[0-7]))?", re.M)
_LINE = lazy_re(r"^\s{0,12}[-*] \*\*(?:GPU \d{1,3}|Power|PCIe):\*\* ", re.M)


def looks_like_rig_report(text: str) -> bool:
    """The report's title, or a GPU bullet followed by its Power or PCIe bullet (a pasted excerpt)."""
    head = text[:16384]
    if "**GPU " not in head:
        return False
    return bool(_GPU.search(head)) and (TITLE in head or "**Power:**" in head or "**PCIe:**" in head)


def parse_rig_report(text: str) -> SmiReport:
    """The GPUs of a rig report: name, memory, driver, power limits and PCIe link widths by GPU bullet."""
    starts = list(_GPU.finditer(text))
    if not starts:
        raise ParseError(f"no '- **GPU n:** <name> | <MiB> MiB' line: not the GPU section of a {TITLE}")
    if len(starts) > MAX_GPUS:
        raise ParseError(f"{len(starts)} GPU lines: more than the {MAX_GPUS} one host can hold")
    gpus = []
    for number, start in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(text)
        gpus.append(_gpu(start, _bullets(text[start.end():end])))
    if len({g.index for g in gpus}) != len(gpus):
        raise ParseError("a GPU index is listed twice")
    driver = next((g.driver_version for g in gpus if g.driver_version), None)
    return SmiReport(driver_version=driver, gpus=tuple(gpus), format="rig-report")


def _bullets(block: str) -> str:
    """The sub-bullets of one GPU: the lines up to the first line that is not one of them."""
    lines = []
    for line in block.split("\n")[1:]:
        if not _LINE.match(line) or line.lstrip().startswith(("- **GPU ", "* **GPU ")):
            break
        lines.append(line)
    return "\n".join(lines)


def _gpu(head: re.Match[str], bullets: str) -> Gpu:
    power, pcie = _POWER.search(bullets), _PCIE.search(bullets)
    pm = (head["pm"] or "").lower()
    values: dict[str, object] = {
        "index": int(head["index"]), "name": head["name"].strip(), "memory_total_mib": float(head["mib"]),
        "driver_version": head["driver"], "vbios_version": head["vbios"],
        "persistence_mode": {"enabled": True, "disabled": False}.get(pm), "source": TITLE,
    }
    if power:
        values.update(power_limit_w=float(power["limit"]), power_default_limit_w=float(power["default"]),
                      power_draw_w=float(power["draw"]) if power["draw"] else None)
    if pcie:
        width, width_max = int(pcie["width"]), int(pcie["width_max"])
        if not 0 < width <= 32 or not 0 < width_max <= 32:
            raise ParseError(f"GPU {head['index']}: link width x{width} of x{width_max} is no PCIe width")
        values.update(pcie_width_current=width, pcie_width_max=width_max,
                      pcie_gen_max=int(pcie["gen_max"]) if pcie["gen_max"] else None,
                      pci_address=normalize_pci_address(pcie["bus"]))
    return Gpu(**values)
