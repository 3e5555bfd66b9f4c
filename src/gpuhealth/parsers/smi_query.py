"""Parse ``nvidia-smi -q`` text (full, ``-d``-filtered, or a pasted excerpt) into an SmiReport.

Each line is ``<indent><key> : <value>`` or a bare ``<indent><section>``. Key columns are 36, 42 or
55 characters wide depending on the driver, and pasted excerpts lose the padding, so lines are split
on the first " : " and the indentation alone says which section a key belongs to. Every key becomes
a path (``"ecc errors/volatile/sram correctable"``) relative to its GPU, which makes same-named keys
in different sections (a MIG device's ECC counts, module power readings) impossible to confuse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from operator import itemgetter

from gpuhealth.lazyre import guarded_re, has, has_folded, lazy_re
from gpuhealth.model import Gpu, GpuProcess, ParseError, SmiReport, normalize_pci_address
from gpuhealth.parsers._values import MAX_FIELD_ERRORS, clean, flag, is_error_value, number
from gpuhealth.parsers.smi_xml import (
    CLOCK_EVENT_REASONS,
    any_flag,
    mig_device_count,
    pci_device_id,
    reset_required,
    sram_uncorrectable,
    to_int,
    total,
    version,
)

_GPU_HEADER = lazy_re(r"GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_VERSION_LINE = guarded_re(r"^(?:Driver|KMD|CUDA|CUDA UMD) Version +: ", re.M, may=has(" Version "))
_HOST_KEYS = {"timestamp", "driver version", "cuda version", "kmd version", "cuda umd version",
              "attached gpus", "hic info", "attached units"}
_INFOROM_WARNING = guarded_re(r"WARNING: infoROM is corrupted at gpu (\S+)", re.IGNORECASE,
                              may=has_folded("inforom is corrupted at gpu"))
# Text labels of the clock event (throttle) reasons, to the snake_case names the XML uses.
_REASONS = dict(zip(
    ("idle", "applications clocks setting", "sw power cap", "hw slowdown", "hw thermal slowdown",
     "hw power brake slowdown", "sync boost", "sw thermal slowdown", "display clock setting"),
    CLOCK_EVENT_REASONS, strict=True))


class _Block:
    """One GPU's lines as (path, value) pairs; value None for a bare section line. (A plain class: a dataclass's
    generated methods are compiled as the module is imported, on every start-up.)"""

    def __init__(self, bus_id: str | None) -> None:
        self.bus_id = bus_id
        self.entries: list[tuple[str, str | None]] = []
        self.values: dict[str, str] = {}  # first value per path
        # (path, index in entries) of each top-level line: the lines up to the next one are nested under it
        self.tops: list[tuple[str, int]] = []

    def under(self, *sections: str) -> Iterator[tuple[str, str | None]]:
        """The entries whose path starts with one of ``sections`` + "/", among others of the same top-level
        lines (the caller tests each path): only the top-level sections named are looked through."""
        prefixes = tuple(f"{section}/" for section in sections)
        tops = self.tops
        for place, (path, start) in enumerate(tops):
            if path in sections or path.startswith(prefixes):
                yield from self.entries[start:tops[place + 1][1] if place + 1 < len(tops) else len(self.entries)]

    def get(self, *paths: str) -> str | None:
        """The first of several paths with a real value: drivers renamed keys over time."""
        for path in paths:
            if clean(self.values.get(path)) is not None:
                return self.values[path]
        return None


def parse_smi_query(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q`` text. Raises ParseError when the text is not that output."""
    if not isinstance(text, str):
        raise ParseError("not nvidia-smi -q output: input is not text")
    host, blocks, warnings = _split(text)
    known = any(path.split("/", 1)[0] in _KNOWN_KEYS for block in blocks for path in block.values)
    # `nvidia-smi -q | grep -i version` keeps the host's version lines: the driver and the CUDA it supports
    # (as -q writes them: `nvidia-smi --version` prints "KMD version", "DRIVER version", and is not -q output)
    versions = any(version(host.get(key)) for key in ("driver version", "kmd version", "cuda version",
                                                      "cuda umd version")) and bool(_VERSION_LINE.search(text))
    if not known and "attached gpus" not in host and not versions:
        raise ParseError("not nvidia-smi -q output: no 'GPU <bus id>' section and no known keys")
    # 610 deprecates "Driver Version" and "CUDA Version" in favour of "KMD" and "CUDA UMD Version".
    driver = version(host.get("kmd version")) or version(host.get("driver version"))
    cuda = version(host.get("cuda umd version")) or version(host.get("cuda version"))
    corrupted = {normalize_pci_address(m[1]) for m in map(_INFOROM_WARNING.search, warnings) if m}
    numbered = any(block.bus_id for block in blocks)
    # grep's "--" parts of a whole report are its GPUs in order, which is nvidia-smi's index order
    gpus = tuple(_gpu(block, index if numbered or len(blocks) > 1 else None, driver, cuda, corrupted)
                 for index, block in enumerate(blocks))
    attached = to_int(host.get("attached gpus"))
    if attached is not None and numbered and attached != len(gpus):
        warnings.append(f"nvidia-smi reports {attached} attached GPUs but the output shows {len(gpus)}")
    # Without its GPU header lines the text is a piece of the report (`-q | grep -A8 "GPU Link Info"`); with
    # fewer GPUs than "Attached GPUs" it is one GPU's (`-q -i 0`): neither is the driver's whole list.
    partial = (not numbered and attached is None) or (attached or 0) > len(gpus)
    return SmiReport(driver_version=driver, cuda_version=cuda, gpus=gpus, warnings=tuple(warnings),
                     format="query", partial=partial)


def _split(text: str) -> tuple[dict[str, str], list[_Block], list[str]]:
    """Host-level keys, one block per GPU, and the WARNING lines nvidia-smi prints before its log."""
    host: dict[str, str] = {}
    blocks: list[_Block] = []
    warnings: list[str] = []
    lines = text.expandtabs(8).splitlines()
    has_headers = any(_header(line) for line in lines if line.startswith("GPU "))  # a header starts so
    stack: list[tuple[int, str]] = []  # (indent, path) of the lines enclosing the current one
    block: _Block | None = None
    apart = False  # a grep separator ("--") was passed: the next header-less line starts another GPU
    normal: dict[str, str] = {}  # a key as written -> lower-cased, spaces collapsed (keys repeat per GPU)
    seen: dict[str, tuple[int, str, str | None]] = {}  # a line -> (indent, key, value): GPUs repeat most lines
    # (the loop runs once per line of a report of thousands: splitting and storing are written inline, and
    # the rare line forms are looked at only when the first character allows them)
    for line in lines:
        known = seen.get(line)
        if known is None:
            content = line.strip()
            if not content:
                continue
            first = content[0]
            if first in "=[-Ww":
                if content.startswith("==") or content == "[...]":
                    continue
                if content == "--":  # `grep -A8` between its matches: in a header-less text, the next GPU's lines
                    block, stack, apart = None, [], bool(blocks)
                    continue
                if first in "Ww" and content[:8].upper().startswith("WARNING:"):  # upper() never shortens
                    warnings.append(content)
                    continue
            indent = line.find(first)  # only whitespace comes before the content's first character
            if not indent:  # most lines are indented: no call
                header = _header(line)
                if header:
                    block, stack = _Block(header), []
                    blocks.append(block)
                    continue
            split = content.find(" : ")
            if split >= 0:
                key, value = content[:split], content[split + 3:].strip()
            elif content.endswith(" :"):
                key, value = content[:-2], ""
            else:
                key, value = content, None
            written = key
            key = normal.get(written)
            if key is None:
                key = normal[written] = " ".join(written.lower().split())
            known = seen[line] = (indent, key, value)
        indent, key, value = known
        if not indent and (key in _HOST_KEYS or has_headers):
            # Host keys, or a later command's output (the 352 bug report appends "-q -u"): no GPU's.
            if value is not None:
                host.setdefault(key, value)
            block, stack = None, []
            continue
        if block is None:
            if has_headers:
                continue
            if not blocks or (apart and blocks[-1].entries):
                blocks.append(_Block(None))  # an excerpt without its "GPU <bus id>" line
            block, apart = blocks[-1], False
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if stack:
            path = f"{stack[-1][1]}/{key}"
        else:
            path = key
            block.tops.append((path, len(block.entries)))
        block.entries.append((path, value))
        if value is not None:
            block.values.setdefault(path, value)
        stack.append((indent, path))
    return host, blocks, warnings


def _header(line: str) -> str | None:
    """The bus id of a ``GPU 00000000:01:00.0`` line, which starts in column 0."""
    match = None if line[:1].isspace() else _GPU_HEADER.fullmatch(line.strip())
    return match[1] if match else None


# 535+ splits "Power Readings" into GPU and Module readings (the module is the whole board, Grace
# included); 590+ prints instantaneous and average draw and nests limits under "GPU Ceiling Power Limit".
_POWER = ("gpu power readings", "power readings")
_POWER_DRAW = tuple(f"{section}/{key}" for section in _POWER
                    for key in ("instantaneous power draw", "average power draw", "power draw"))
_POWER_LIMIT = ("gpu power readings/current power limit",
                "gpu power readings/gpu ceiling power limit/current power limit",
                "power readings/power limit", "power readings/current power limit",
                "gpu power readings/enforced power limit", "power readings/enforced power limit")
_POWER_DEFAULT_LIMIT = ("gpu power readings/default power limit",
                        "gpu power readings/gpu ceiling power limit/default power limit",
                        "power readings/default power limit")
# First keys of a GPU section: an input with none of them is not -q output (or an excerpt of one).
_KNOWN_KEYS = {
    "product name", "gpu uuid", "serial number", "vbios version", "persistence mode", "mig mode", "pci",
    "fan speed", "clocks event reasons", "clocks throttle reasons", "fb memory usage", "utilization",
    "ecc mode", "ecc errors", "retired pages", "remapped rows", "temperature", "power readings",
    "gpu power readings", "gpu reset status", "gpu recovery action", "processes", "gpu link info",
    "fabric",  # `nvidia-smi -q | grep -A2 -i fabric`: each GPU's NVLink fabric registration, the excerpt alone
}


def _pci(key: str) -> tuple[str, str]:
    """A key of the PCI section, and the same key at the top: where a piece cut from inside that section
    (`nvidia-smi -q | grep -A8 "GPU Link Info"`) has it."""
    return f"pci/{key}", key


def _gpu(block: _Block, index: int | None, driver: str | None, cuda: str | None,
         corrupted: set[str | None]) -> Gpu:
    get = block.get
    address = normalize_pci_address(block.bus_id or get("pci/bus id"))
    return Gpu(
        index=index,
        name=clean(get("product name")),
        pci_address=address,
        uuid=clean(get("gpu uuid")),
        serial=clean(get("serial number")),
        pci_device_id=pci_device_id(get("pci/device id")),
        driver_version=driver,
        cuda_version=cuda,
        vbios_version=clean(get("vbios version")),
        persistence_mode=flag(get("persistence mode")),
        compute_mode=clean(get("compute mode")),
        mig_mode_current=clean(get("mig mode/current")),
        mig_mode_pending=clean(get("mig mode/pending")),
        temperature_c=number(get("temperature/gpu current temp")),
        temperature_slowdown_c=number(get("temperature/gpu slowdown temp")),
        temperature_shutdown_c=number(get("temperature/gpu shutdown temp")),
        temperature_max_operating_c=number(get("temperature/gpu max operating temp")),
        memory_temperature_c=number(get("temperature/memory current temp")),
        power_draw_w=number(get(*_POWER_DRAW)),
        power_limit_w=number(get(*_POWER_LIMIT)),
        power_default_limit_w=number(get(*_POWER_DEFAULT_LIMIT)),
        fan_speed_pct=number(get("fan speed")),
        clock_event_reasons=_clock_event_reasons(block),
        memory_total_mib=number(get("fb memory usage/total")),
        memory_used_mib=number(get("fb memory usage/used")),
        utilization_gpu_pct=number(get("utilization/gpu")),
        utilization_memory_pct=number(get("utilization/memory")),
        processes=_processes(block),
        pcie_gen_current=to_int(get(*_pci("gpu link info/pcie generation/current"))),
        pcie_gen_max=to_int(get(*_pci("gpu link info/pcie generation/max"))),
        pcie_width_current=to_int(get(*_pci("gpu link info/link width/current"))),
        pcie_width_max=to_int(get(*_pci("gpu link info/link width/max"))),
        pcie_replay_counter=to_int(get(*_pci("replays since reset"))),
        **_reliability(block),
        inforom_corrupted=True if address and address in corrupted else None,
        mig_devices=_mig_devices(block),
        source="nvidia-smi -q",
        field_errors=tuple(f"{path}: {value.strip()}" for path, value in block.values.items()
                           if is_error_value(value))[:MAX_FIELD_ERRORS],
    )


_REASON_TOPS = ("clocks event reasons", "clocks throttle reasons")
_REASON_SECTIONS = tuple(f"{top}/" for top in _REASON_TOPS)


def _clock_event_reasons(block: _Block) -> tuple[str, ...]:
    """Active reasons under "Clocks Event Reasons" (535+) or "Clocks Throttle Reasons" (older).

    The HW thermal and power-brake lines are indented under "HW Slowdown", so the last path
    component names the reason.
    """
    active = set()
    for path, value in block.under(*_REASON_TOPS):
        if path.startswith(_REASON_SECTIONS) and flag(value) is True:  # a line under one of the sections
            name = _REASONS.get(path.rsplit("/", 1)[-1])
            if name:
                active.add(name)
    return tuple(r for r in CLOCK_EVENT_REASONS if r in active)


def _mig_devices(block: _Block) -> int | None:
    """One "MIG Device" section per MIG device, listed after "MIG Mode" (absent from 352 and -d output)."""
    paths = list(map(itemgetter(0), block.tops))  # (a path without "/" is a top-level line's)
    return mig_device_count(paths.count("mig device"), "mig mode" in paths)


def _processes(block: _Block) -> tuple[GpuProcess, ...]:
    """Each "Process ID" line starts a process; its Type, Name and memory lines are indented under it."""
    found: list[dict[str, str | None]] = []
    for path, value in block.under("processes"):
        if not path.startswith("processes/process id"):
            continue
        if path == "processes/process id":
            found.append({"pid": value})
        elif found and path.startswith("processes/process id/"):
            found[-1].setdefault(path.rsplit("/", 1)[-1], value)
    return tuple(GpuProcess(pid=to_int(p.get("pid")), name=clean(p.get("name")),
                            used_memory_mib=number(p.get("used gpu memory")), type=clean(p.get("type")))
                 for p in found)


def _reliability(block: _Block) -> dict:
    get = block.get
    recovery = clean(get("gpu recovery action"))
    return {
        "ecc_mode_current": clean(get("ecc mode/current")),
        **_ecc_counts(block),
        "retired_pages_sbe": to_int(get("retired pages/single bit ecc")),
        "retired_pages_dbe": to_int(get("retired pages/double bit ecc")),
        # "Pending Page Blacklist" (most drivers), "Pending Page Retirement", "Pending" (352).
        "retired_pages_pending": any_flag(get(f"retired pages/{k}") for k in (
            "pending page blacklist", "pending page retirement", "pending")),
        "remapped_rows_correctable": to_int(get("remapped rows/correctable error")),
        "remapped_rows_uncorrectable": to_int(get("remapped rows/uncorrectable error")),
        "remapped_rows_pending": flag(get("remapped rows/pending")),
        "remapped_rows_failure": flag(get("remapped rows/remapping failure occurred")),
        "remapped_rows_banks_none": to_int(get("remapped rows/bank remap availability histogram/none")),
        "reset_required": reset_required(get("gpu reset status/reset required"), recovery),
        "recovery_action": recovery,
        "fabric_state": (get("fabric/state") or "").strip() or None,  # "N/A" kept: outside an NVSwitch fabric
        # "Success", or the error it ended with: raw, as an NVML error ("Unknown Error") is the status itself
        "fabric_status": (block.values.get("fabric/status") or "").strip() or None,
    }


def _ecc_counts(block: _Block) -> dict:
    counts: dict = {}
    for kind in ("volatile", "aggregate"):
        def count(key: str, kind: str = kind) -> int | None:
            return to_int(block.get(f"ecc errors/{kind}/{key}"))

        # Old drivers: "Single Bit"/"Double Bit" sections with a Total. Newer: SRAM and DRAM lines.
        counts[f"ecc_{kind}_corrected"] = total((
            count("single bit/total"), count("sram correctable"), count("dram correctable")))
        counts[f"ecc_{kind}_uncorrected"] = total((
            count("double bit/total"), count("dram uncorrectable"), _sram_uncorrectable(block, kind)))
    # The lifetime (aggregate) count: what RMA guidance for SRAM errors is stated in.
    counts["sram_uncorrectable"] = _sram_uncorrectable(block, "aggregate")
    return counts


def _sram_uncorrectable(block: _Block, kind: str) -> int | None:
    prefix = f"ecc errors/{kind}/sram uncorrectable"
    return sram_uncorrectable(block.get(prefix), block.get(f"{prefix} parity"),
                              block.get(f"{prefix} sec-ded"))
