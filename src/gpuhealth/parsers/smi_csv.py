"""``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``: one row per GPU.

The header names the fields as queried, with units in brackets (``memory.used [MiB]``); values
carry units unless ``nounits`` was given. Unknown values print as ``[N/A]``, ``[Not Supported]`` or
(590+) ``[Requested functionality has been deprecated]``; all of them become None.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Gpu, ParseError, SmiReport, normalize_pci_address
from gpuhealth.parsers._values import MAX_FIELD_ERRORS, clean, flag, integer, is_error_value, number

_UNIT = lazy_re(r"(?<!\s)\s*\[[^\[\]]*\]\s*$")
_FIELD_NAME = lazy_re(r"[a-z_][a-z0-9_.]*")
_MASK = lazy_re(r"0x[0-9a-fA-F]{1,16}")
_DEVICE_ID = lazy_re(r"(?:0x)?([0-9a-fA-F]{4})10de", re.IGNORECASE)  # "0x233010DE": device, vendor

# Clock event reasons in NVML bit order: bit n of the ``.active`` mask is _REASONS[n].
_REASONS = (
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
    "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting",
)
# 535 renamed clocks_throttle_reasons.* to clocks_event_reasons.*; accept both.
_REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")


def _int(value: str | None) -> int | None:
    try:
        return integer(value)
    except OverflowError:  # a digit run too long to be a real count
        return None


def _pci(value: str | None) -> str | None:
    return normalize_pci_address(clean(value))


def _device_id(value: str | None) -> str | None:
    match = _DEVICE_ID.fullmatch((value or "").strip())
    return match[1].lower() if match else None


def _as_printed(value: str | None) -> str | None:
    return (value or "").strip() or None


# a column whose value is an NVML error string by design, not a field nvidia-smi failed to read
_STATUS_FIELDS = ("fabric.status",)

# Gpu attribute, the CSV fields that can fill it (first non-empty wins), and the converter.
_FIELDS: tuple[tuple[str, tuple[str, ...], Callable[[str | None], object]], ...] = (
    ("index", ("index",), _int),
    ("name", ("name", "gpu_name"), clean),
    ("pci_address", ("pci.bus_id", "gpu_bus_id"), _pci),
    ("uuid", ("uuid", "gpu_uuid"), clean),
    ("serial", ("serial", "gpu_serial"), clean),
    ("pci_device_id", ("pci.device_id",), _device_id),
    ("driver_version", ("kmd_version", "driver_version"), clean),  # 610 deprecates driver_version
    ("vbios_version", ("vbios_version",), clean),
    ("persistence_mode", ("persistence_mode",), flag),
    ("compute_mode", ("compute_mode",), clean),
    ("mig_mode_current", ("mig.mode.current",), clean),
    ("mig_mode_pending", ("mig.mode.pending",), clean),
    ("temperature_c", ("temperature.gpu",), number),
    ("memory_temperature_c", ("temperature.memory",), number),
    # Like the XML and -q parsers: the instant reading first, and the limit the driver enforces.
    ("power_draw_w", ("power.draw.instant", "gpu.power.draw.instant", "power.draw", "power.draw.average",
                      "gpu.power.draw.average"), number),
    ("power_limit_w", ("enforced.power.limit", "gpu.power.current_limit", "power.limit",
                       "gpu.power.requested_limit"), number),
    ("power_default_limit_w", ("power.default_limit", "gpu.power.default_limit"), number),
    ("fan_speed_pct", ("fan.speed",), number),
    ("memory_total_mib", ("memory.total",), number),
    ("memory_used_mib", ("memory.used",), number),
    ("utilization_gpu_pct", ("utilization.gpu",), number),
    ("utilization_memory_pct", ("utilization.memory",), number),
    # "current" is the negotiated link; "gpucurrent" (590+) the GPU's side of it.
    ("pcie_gen_current", ("pcie.link.gen.current", "pcie.link.gen.gpucurrent"), _int),
    ("pcie_gen_max", ("pcie.link.gen.max", "pcie.link.gen.gpumax"), _int),
    ("pcie_width_current", ("pcie.link.width.current",), _int),
    ("pcie_width_max", ("pcie.link.width.max",), _int),
    ("ecc_mode_current", ("ecc.mode.current",), clean),
    ("ecc_volatile_corrected", ("ecc.errors.corrected.volatile.total",), _int),
    ("ecc_volatile_uncorrected", ("ecc.errors.uncorrected.volatile.total",), _int),
    ("ecc_aggregate_corrected", ("ecc.errors.corrected.aggregate.total",), _int),
    ("ecc_aggregate_uncorrected", ("ecc.errors.uncorrected.aggregate.total",), _int),
    ("retired_pages_sbe", ("retired_pages.single_bit_ecc.count", "retired_pages.sbe"), _int),
    ("retired_pages_dbe", ("retired_pages.double_bit.count", "retired_pages.dbe"), _int),
    ("retired_pages_pending", ("retired_pages.pending",), flag),
    ("remapped_rows_correctable", ("remapped_rows.correctable", "remapped_rows.sbe"), _int),
    ("remapped_rows_uncorrectable", ("remapped_rows.uncorrectable", "remapped_rows.dbe"), _int),
    ("remapped_rows_pending", ("remapped_rows.pending",), flag),
    ("remapped_rows_failure", ("remapped_rows.failure",), flag),
    ("recovery_action", ("gpu_recovery_action",), clean),  # 590+: "None", "GPU Reset", ...
    # the NVLink fabric registration (nvidia-smi --help-query-gpu: fabric.state; fabric.status, the error status valid
    # once the state is "completed"), kept as printed: an NVML error such as "Unknown Error" is the status itself
    ("fabric_state", ("fabric.state",), _as_printed),
    ("fabric_status", ("fabric.status",), _as_printed),
)
_KNOWN = {name for _, names, _ in _FIELDS for name in names} | {
    prefix + suffix for prefix in _REASON_PREFIXES for suffix in (*_REASONS, "active")
}

# Fields of --query-compute-apps / --query-accounted-apps / --query-retired-pages, whose rows are
# processes or pages: they share gpu_name, gpu_uuid ... with --query-gpu but are not one row per GPU.
_OTHER_QUERIES = {"pid", "process_name", "used_gpu_memory", "used_memory", "retired_pages.address"}


def parse_smi_csv(text: str, fields: Sequence[str] | None = None) -> SmiReport:
    """Parse ``--query-gpu`` CSV. ``fields`` names the columns of ``noheader`` output; it may also be
    the comma-separated ``--query-gpu=`` argument itself."""
    rows = _read_rows(text)
    names = _columns(rows, fields)
    if set(names) & _OTHER_QUERIES:
        raise ParseError("CSV of per-process or retired-page queries, not --query-gpu")
    if not set(names) & _KNOWN:
        raise ParseError("no --query-gpu field this parser knows in the CSV columns")
    gpus = []
    for line, row in enumerate(rows, start=1):
        if len(row) != len(names):
            raise ParseError(f"CSV row {line} has {len(row)} values for {len(names)} fields")
        gpus.append(_gpu(dict(zip(names, row, strict=True))))
    driver = next((gpu.driver_version for gpu in gpus if gpu.driver_version), None)
    return SmiReport(driver_version=driver, gpus=tuple(gpus), format="csv")


def _columns(rows: list[list[str]], fields: Sequence[str] | None) -> list[str]:
    """The field names: from the header row (removed from ``rows``), else from ``fields``."""
    if isinstance(fields, str):
        fields = fields.split(",")
    given = [_field_name(f) for f in fields] if fields is not None else None
    # A header row is used (and skipped) even when fields were passed, if it names the same fields.
    if rows and (given is None or [_field_name(v) for v in rows[0]] == given):
        return _header(rows.pop(0))
    if given is None:
        raise ParseError("empty CSV")
    return given


def _read_rows(text: str) -> list[list[str]]:
    try:
        rows = csv.reader(io.StringIO(text), skipinitialspace=True)
        return [[value.strip() for value in row] for row in rows if any(v.strip() for v in row)]
    except csv.Error as exc:  # NUL bytes, oversized fields
        raise ParseError(f"unreadable CSV: {exc}") from exc


def _field_name(text: str) -> str:
    """``memory.used [MiB]`` -> ``memory.used``; lower case, as field names are case-insensitive."""
    return _UNIT.sub("", text).strip().lower()


def _header(row: list[str]) -> list[str]:
    names = [_field_name(value) for value in row]
    bad = next((name for name in names if not _FIELD_NAME.fullmatch(name)), None)
    if bad is not None:
        raise ParseError(f"first CSV row is not a --query-gpu header ({bad[:40]!r} is no field name); "
                         "for noheader output pass fields=")
    return names


def _gpu(row: dict[str, str]) -> Gpu:
    values: dict[str, object] = {}
    for attribute, names, convert in _FIELDS:
        for name in names:
            value = convert(row[name]) if name in row else None
            if value is not None:
                values[attribute] = value
                break
    errors = tuple(f"{name}: {value.strip()}" for name, value in row.items()
                   if is_error_value(value) and name not in _STATUS_FIELDS)
    return Gpu(**values, clock_event_reasons=_reasons(row), source="nvidia-smi --query-gpu",
               field_errors=errors[:MAX_FIELD_ERRORS])


def _reasons(row: dict[str, str]) -> tuple[str, ...]:
    """Active reasons from the per-reason columns, else decoded from the ``.active`` bit mask."""
    queried = [(reason, row[p + reason])
               for reason in _REASONS for p in _REASON_PREFIXES if p + reason in row]
    if queried:
        return tuple(dict.fromkeys(reason for reason, value in queried if flag(value)))
    for prefix in _REASON_PREFIXES:
        mask = row.get(prefix + "active", "")
        if _MASK.fullmatch(mask):
            bits = int(mask, 16)
            return tuple(reason for bit, reason in enumerate(_REASONS) if bits >> bit & 1)
    return ()
