"""The default ``nvidia-smi`` table: driver/CUDA header, one box per GPU, MIG devices, processes.

Two layouts exist: the 79-column one (up to ~525) and the 89-column one (550+, wider name and
bus-id cells, often preceded by a timestamp line). Both are read the same way: every table line is
split on ``|`` into cells, and the position of a line inside its box says what the cells hold, so
column widths never matter.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Gpu, GpuProcess, ParseError, SmiReport, normalize_pci_address
from gpuhealth.parsers._values import clean, flag, is_error_value, number

_DRIVER = lazy_re(r"(?:Driver|KMD) Version:\s*(\S+)")  # 610 renamed it "KMD Version"
_CUDA = lazy_re(r"CUDA (?:UMD )?Version:\s*(\S+)")  # ... and "CUDA UMD Version"
_TIMESTAMP = lazy_re(r"\w{3} \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}")  # "Tue Jul 14 09:00:26 2026"
_INFOROM = lazy_re(r"infoROM is corrupted at gpu\s+(\S+)", re.IGNORECASE)
# Caps on digit runs keep absurd numbers from mangled input out of int().
_GPU_CELL = lazy_re(r"(\d{1,4})\s+(.*?)\s+(\S+)")  # index, name, persistence (or WDDM/TCC)
_STATUS_CELL = lazy_re(r"(\S+)\s+(\S+)\s+(\S+)\s+(.*)")  # fan, temp, perf, power draw / cap
_MIG_CELL = lazy_re(r"(\d{1,4})\s+(?:\d{1,4}|N/A)\s+(?:\d{1,4}|N/A)\s+\d{1,4}")  # GPU GI CI MIG-dev
# GPU, optional GI and CI (absent before MIG existed), PID, type (C, G, C+G, M ...), name, memory.
_PROCESS = lazy_re(r"(\d{1,4})\s+(?:\S+\s+\S+\s+)?(\d{1,10})\s+([CGM](?:\+[CGM])*)\s+(.*?)\s+(\S+)")
_COUNT = lazy_re(r"\d{1,12}")
# The table abbreviates compute modes; use the names -q, XML and CSV print.
_COMPUTE_MODES = {"E. Process": "Exclusive_Process", "E. Thread": "Exclusive_Thread"}
_SECTIONS = (("Bus-Id", "gpus"), ("MIG devices:", "mig"), ("Processes:", "procs"))


def parse_smi_table(text: str) -> SmiReport:
    """Parse the output of plain ``nvidia-smi``; ParseError when it holds no table header with a driver version. A
    table cut after its header is a ``partial`` report without GPUs."""
    table = _Table()
    for line in text.splitlines():
        table.feed(line.strip())
    return table.report()


def _is_separator(line: str) -> bool:
    return line[0] in "+|" and set(line) <= set("+-=|") and ("-" in line or "=" in line)


def _fan_error(fan: str) -> bool | None:
    """ERR! means the fan (or its tachometer) failed; N/A means the board reports no fan."""
    if fan.upper() == "ERR!":
        return True
    return False if number(fan) is not None else None


def _count(text: str) -> int | None:
    return int(text) if _COUNT.fullmatch(text) else None


class _Table:
    """Reads the table line by line; ``mode`` says which box the current lines belong to."""

    def __init__(self) -> None:
        self.driver: str | None = None
        self.cuda: str | None = None
        self.header_seen = False
        self.gpu_header_seen = False
        self.mode: str | None = None
        self.in_column_header = False  # the column titles, up to the |=====| line
        self.block: list[list[str]] = []  # the rows of one GPU box
        self.gpus: list[dict] = []
        self.processes: dict[int, list[GpuProcess]] = {}
        self.mig_devices: dict[int, int] = {}
        self.mig_ecc: dict[int, int] = {}
        self.warnings: list[str] = []
        self.inforom_corrupted: set[str] = set()

    def feed(self, line: str) -> None:
        if not line or line[0] not in "+|":
            self._flush()
            self._text(line)
        elif _is_separator(line):
            self._flush()
            if "=" in line:
                self.in_column_header = False
        elif "NVIDIA-SMI" in line:
            self._versions(line)
        elif not self._section(line) and self.mode and not self.in_column_header:
            self._row([cell.strip() for cell in line.strip("|").split("|")])

    def _section(self, line: str) -> bool:
        for marker, mode in _SECTIONS:
            if marker in line:
                self._flush()
                self.mode, self.in_column_header = mode, True
                self.gpu_header_seen |= mode == "gpus"
                return True
        return False

    def _versions(self, line: str) -> None:
        if self.header_seen:  # "nvidia-smi -l" repeats the table: keep the last one
            self.gpus, self.processes, self.mig_devices, self.mig_ecc = [], {}, {}, {}
        self.header_seen = True
        self.mode = None
        driver, cuda = _DRIVER.search(line), _CUDA.search(line)
        self.driver = clean(driver[1]) if driver else None
        self.cuda = clean(cuda[1]) if cuda else None

    def _text(self, line: str) -> None:
        # Outside the boxes nvidia-smi prints only the timestamp and warnings or errors, such as
        # "WARNING: infoROM is corrupted at gpu ..." or "Unable to determine the device handle ...".
        if not line or _TIMESTAMP.fullmatch(line):
            return
        self.warnings.append(line)
        match = _INFOROM.search(line)
        address = normalize_pci_address(match[1].rstrip(".")) if match else None
        if address:
            self.inforom_corrupted.add(address)

    def _row(self, cells: list[str]) -> None:
        if self.mode == "gpus":
            self.block.append(cells)
        elif self.mode == "mig":
            self._mig_row(cells)
        elif self.mode == "procs":
            self._process_row(cells)

    def _mig_row(self, cells: list[str]) -> None:
        match = _MIG_CELL.fullmatch(cells[0])
        if not match:
            return  # the second line of a MIG box (BAR1 usage), or "No MIG devices found"
        gpu = int(match[1])
        self.mig_devices[gpu] = self.mig_devices.get(gpu, 0) + 1
        # The third cell is "SM  Vol-Unc-ECC": in MIG mode the GPU row shows no ECC count.
        ecc = cells[2].split() if len(cells) > 2 else []
        if len(ecc) == 2 and _count(ecc[1]) is not None:
            self.mig_ecc[gpu] = self.mig_ecc.get(gpu, 0) + int(ecc[1])

    def _process_row(self, cells: list[str]) -> None:
        match = _PROCESS.fullmatch(cells[0])
        if match:  # else "No running processes found"
            process = GpuProcess(pid=int(match[2]), name=match[4] or None, used_memory_mib=number(match[5]))
            self.processes.setdefault(int(match[1]), []).append(process)

    def _flush(self) -> None:
        if self.block:
            self.gpus.append(_gpu_block(self.block))
            self.block = []

    def report(self) -> SmiReport:
        self._flush()
        if not self.header_seen:
            raise ParseError("no 'NVIDIA-SMI ... Driver Version' table header: not nvidia-smi table output")
        if not self.gpu_header_seen or not self.gpus:
            if not self.driver:
                raise ParseError("nvidia-smi table has no GPU rows")
            # a table cut after its header line (a screenshot's text, `nvidia-smi | head -3`): the driver and the
            # newest CUDA it supports, and no word about the GPUs
            return SmiReport(driver_version=self.driver, cuda_version=self.cuda, warnings=tuple(self.warnings),
                             format="table", partial=True)
        return SmiReport(
            driver_version=self.driver,
            cuda_version=self.cuda,
            gpus=tuple(self._finish(values) for values in self.gpus),
            warnings=tuple(self.warnings),
            format="table",
        )

    def _finish(self, values: dict) -> Gpu:
        index = values["index"]
        if index in self.mig_devices:
            values["mig_devices"] = self.mig_devices[index]
        if values.get("ecc_volatile_uncorrected") is None and index in self.mig_ecc:
            values["ecc_volatile_uncorrected"] = self.mig_ecc[index]
        corrupted = values.get("pci_address") in self.inforom_corrupted
        return Gpu(
            **values,
            driver_version=self.driver,
            cuda_version=self.cuda,
            processes=tuple(self.processes.get(index, ())),
            inforom_corrupted=True if corrupted else None,
            source="nvidia-smi",
        )


def _gpu_block(rows: list[list[str]]) -> dict:
    """One GPU box: name row, status row, and (since ~450) a row ending in the MIG mode."""
    if len(rows) < 2 or len(rows[0]) < 3 or len(rows[1]) < 3:
        raise ParseError(f"incomplete GPU box starting {' | '.join(rows[0])[:60]!r}")
    first, status = _GPU_CELL.fullmatch(rows[0][0]), _STATUS_CELL.fullmatch(rows[1][0])
    if not first or not status:
        raise ParseError(f"unreadable GPU box starting {' | '.join(rows[0])[:60]!r}")
    bus = rows[0][1].split()
    fan, temperature, perf, power = status.groups()
    draw, _, limit = power.partition("/")
    used, _, total = rows[1][1].partition("/")
    load = rows[1][2].split(maxsplit=1)
    compute = clean(load[1]) if len(load) > 1 else None
    cells = (("Name", first[2]), ("Volatile Uncorr. ECC", rows[0][2]), ("Fan", fan), ("Temp", temperature),
             ("Perf", perf), ("Pwr:Usage", draw), ("Pwr:Cap", limit), ("GPU-Util", load[0] if load else None),
             ("MIG M.", rows[2][2] if len(rows) > 2 and len(rows[2]) > 2 else None))
    return {
        "index": int(first[1]),
        # as printed: the old layout truncates it ("Tesla V100-SXM2..."); ERR! when the driver could not read it
        "name": None if is_error_value(first[2]) else first[2] or None,
        "field_errors": tuple(f"{label}: {value.strip()}" for label, value in cells if is_error_value(value)),
        "persistence_mode": flag(first[3]),
        "pci_address": normalize_pci_address(bus[0]) if bus else None,
        "ecc_volatile_uncorrected": _count(rows[0][2]),
        "fan_speed_pct": number(fan),
        "fan_error": _fan_error(fan),
        "temperature_c": number(temperature),
        "power_draw_w": number(draw),
        "power_limit_w": number(limit),
        "memory_used_mib": number(used),
        "memory_total_mib": number(total),
        "utilization_gpu_pct": number(load[0]) if load else None,
        "compute_mode": _COMPUTE_MODES.get(compute, compute) if compute else None,
        "mig_mode_current": clean(rows[2][2]) if len(rows) > 2 and len(rows[2]) > 2 else None,
        # Tables with the MIG M. row list every MIG device below, so a GPU without any has none.
        "mig_devices": 0 if len(rows) > 2 else None,
    }
