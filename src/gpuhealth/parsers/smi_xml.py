"""Parse ``nvidia-smi -q -x`` (XML, DTD v10 to v13) into an SmiReport.

Also home of the helpers the ``-q`` text parser shares: the two outputs carry the same facts under
different names, and these decide how a fact is derived (ECC sums, recovery action, MIG count).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import Gpu, GpuProcess, ParseError, SmiReport, normalize_pci_address
from gpuhealth.parsers._values import clean, flag, integer, number

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

# The snake_case names checks use, in nvidia-smi's own order.
CLOCK_EVENT_REASONS = (
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
    "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown", "display_clock_setting",
)
_VERSION = lazy_re(r"\d+(?:\.\d+)+")
_DEVICE_ID = lazy_re(r"(?:0x)?([0-9a-fA-F]{4})([0-9a-fA-F]{4})")


# --------------------------------------------------------------------------- shared helpers


def to_int(value: str | None) -> int | None:
    """integer(), but None for a count too long for a float (garbage, not a real counter)."""
    try:
        return integer(value)
    except OverflowError:
        return None


def version(value: str | None) -> str | None:
    """The leading version number: 610 prints ``610.57.04 [Deprecated; ...]``, which clean() drops."""
    match = _VERSION.match((value or "").strip())
    return match.group() if match else None


def pci_device_id(value: str | None) -> str | None:
    """``0x233010DE`` (text) or ``233010DE`` (XML), device then vendor, to ``2330``.

    Device 0000 does not exist; an AWS A10G capture prints ``000000DE`` (masked or virtualized).
    """
    match = _DEVICE_ID.fullmatch((value or "").strip())
    return match.group(1).lower() if match and match.group(1) != "0000" else None


def total(counts: Iterable[int | None]) -> int | None:
    """Sum of the known counts; None when none is known (N/A on consumer boards)."""
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def sram_uncorrectable(plain: str | None, parity: str | None, secded: str | None) -> int | None:
    """535+ text and DTD v13 split SRAM uncorrectable into parity and SEC-DED; never count both."""
    count = to_int(plain)
    return count if count is not None else total((to_int(parity), to_int(secded)))


def any_flag(values: Iterable[str | None]) -> bool | None:
    """True if any value says yes, False if one says no and none yes, else None."""
    flags = [flag(v) for v in values]
    if True in flags:
        return True
    return False if False in flags else None


def reset_required(required: str | None, recovery_action: str | None) -> bool | None:
    """``Reset Required`` (535) when known, else 590+'s recovery action: anything but "None" is work."""
    stated = flag(required)
    if stated is not None:
        return stated
    action = clean(recovery_action)
    return None if action is None else action.lower() != "none"


def mig_device_count(listed: int, section_present: bool) -> int | None:
    """How many MIG devices the output lists; None when it has no place to list them."""
    return listed if listed or section_present else None


# --------------------------------------------------------------------------- XML


def parse_smi_xml(text: str) -> SmiReport:
    """Parse ``nvidia-smi -q -x`` output. Raises ParseError for anything else."""
    root = _root(text)
    # 610's -q text deprecates Driver/CUDA Version for KMD/CUDA UMD Version; expect the XML to follow.
    driver = version(_text(root, "kmd_version")) or version(_text(root, "driver_version"))
    cuda = version(_text(root, "cuda_umd_version")) or version(_text(root, "cuda_version"))
    gpus = tuple(_gpu(node, index, driver, cuda) for index, node in enumerate(root.findall("gpu")))
    warnings = ()
    attached = to_int(_text(root, "attached_gpus"))
    if attached is not None and attached != len(gpus):
        warnings = (f"nvidia-smi reports {attached} attached GPUs but the output shows {len(gpus)}",)
    return SmiReport(driver_version=driver, cuda_version=cuda, gpus=gpus, warnings=warnings, format="xml")


def _root(text: str) -> ET.Element:
    import xml.etree.ElementTree as ET  # here: a bundle or paste without XML does not pay for it

    if not isinstance(text, str):
        raise ParseError("not nvidia-smi -q -x XML: input is not text")
    # nvidia-smi never declares entities; refusing them rules out entity-expansion bombs.
    if "<!entity" in text.lower():
        raise ParseError("not nvidia-smi -q -x XML: it declares entities")
    try:
        root = ET.fromstring(text)
    except (ET.ParseError, ValueError) as exc:  # ValueError covers unencodable text
        raise ParseError(f"not nvidia-smi -q -x XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError("not nvidia-smi -q -x XML: no <nvidia_smi_log> root")
    return root


def _text(node: ET.Element | None, path: str) -> str | None:
    """The element's text, or None when the element is absent (clean() handles placeholders)."""
    if node is None:
        return None
    found = node.find(path)
    return None if found is None or found.text is None else found.text.strip()


def _first(node: ET.Element, *paths: str) -> str | None:
    """The first of several paths with a real value: drivers renamed elements over time."""
    for path in paths:
        value = _text(node, path)
        if clean(value) is not None:
            return value
    return None


def _gpu(node: ET.Element, index: int, driver: str | None, cuda: str | None) -> Gpu:
    pci = node.find("pci")
    return Gpu(
        index=index,
        name=clean(_text(node, "product_name")),
        pci_address=normalize_pci_address(node.get("id") or _text(pci, "pci_bus_id")),
        uuid=clean(_text(node, "uuid")),
        serial=clean(_text(node, "serial")),
        pci_device_id=pci_device_id(_text(pci, "pci_device_id")),
        driver_version=driver,
        cuda_version=cuda,
        vbios_version=clean(_text(node, "vbios_version")),
        persistence_mode=flag(_text(node, "persistence_mode")),
        compute_mode=clean(_text(node, "compute_mode")),
        mig_mode_current=clean(_text(node, "mig_mode/current_mig")),
        mig_mode_pending=clean(_text(node, "mig_mode/pending_mig")),
        **_thermal_and_power(node),
        fan_speed_pct=number(_text(node, "fan_speed")),
        clock_event_reasons=_clock_event_reasons(node),
        memory_total_mib=number(_text(node, "fb_memory_usage/total")),
        memory_used_mib=number(_text(node, "fb_memory_usage/used")),
        utilization_gpu_pct=number(_text(node, "utilization/gpu_util")),
        utilization_memory_pct=number(_text(node, "utilization/memory_util")),
        processes=tuple(_process(p) for p in node.findall("processes/process_info")),
        **_pcie(pci),
        **_reliability(node),
        # <fabric><state>/<status>: the GPU's NVLink fabric registration, as -q's "Fabric" section (R525 and newer)
        # (as -q's, kept as printed: "N/A" outside a fabric, and an error such as "Unknown Error" is the status itself)
        fabric_state=(_text(node, "fabric/state") or "").strip() or None,
        fabric_status=(_text(node, "fabric/status") or "").strip() or None,
        mig_devices=mig_device_count(
            len(node.findall("mig_devices/mig_device")),
            node.find("mig_devices") is not None or node.find("mig_mode") is not None,
        ),
        source="nvidia-smi -q -x",
    )


def _thermal_and_power(node: ET.Element) -> dict:
    temp = node.find("temperature")
    # 535+ splits readings into gpu_/module_power_readings; the module is the whole board (Grace).
    power = node.find("gpu_power_readings")
    if power is None:
        power = node.find("power_readings")
    return {
        "temperature_c": number(_text(temp, "gpu_temp")),
        "temperature_slowdown_c": number(_text(temp, "gpu_temp_slow_threshold")),
        "temperature_shutdown_c": number(_text(temp, "gpu_temp_max_threshold")),
        "temperature_max_operating_c": number(_text(temp, "gpu_temp_max_gpu_threshold")),
        "memory_temperature_c": number(_text(temp, "memory_temp")),
        "power_draw_w": None if power is None else number(
            _first(power, "instant_power_draw", "average_power_draw", "power_draw")),
        "power_limit_w": None if power is None else number(
            _first(power, "current_power_limit", "power_limit", "enforced_power_limit")),
        "power_default_limit_w": number(_text(power, "default_power_limit")),
    }


def _clock_event_reasons(node: ET.Element) -> tuple[str, ...]:
    """Active reasons from ``clocks_event_reasons`` (535+) or ``clocks_throttle_reasons`` (older)."""
    active = set()
    for section, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                            ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        for child in _children(node, section):
            name = child.tag.removeprefix(prefix).replace("display_clocks_setting", "display_clock_setting")
            if name in CLOCK_EVENT_REASONS and flag(child.text) is True:
                active.add(name)
    return tuple(r for r in CLOCK_EVENT_REASONS if r in active)


def _children(node: ET.Element, path: str) -> list[ET.Element]:
    found = node.find(path)
    return [] if found is None else list(found)


def _process(node: ET.Element) -> GpuProcess:
    return GpuProcess(
        pid=to_int(_text(node, "pid")),
        name=clean(_text(node, "process_name")),
        used_memory_mib=number(_text(node, "used_memory")),
        type=clean(_text(node, "type")),
    )


def _pcie(pci: ET.Element | None) -> dict:
    link = None if pci is None else pci.find("pci_gpu_link_info")
    return {
        "pcie_gen_current": to_int(_text(link, "pcie_gen/current_link_gen")),
        "pcie_gen_max": to_int(_text(link, "pcie_gen/max_link_gen")),
        "pcie_width_current": to_int(_text(link, "link_widths/current_link_width")),
        "pcie_width_max": to_int(_text(link, "link_widths/max_link_width")),
        "pcie_replay_counter": to_int(_text(pci, "replay_counter")),
    }


def _reliability(node: ET.Element) -> dict:
    ecc = node.find("ecc_errors")
    retired = node.find("retired_pages")
    remapped = node.find("remapped_rows")
    recovery = clean(_text(node, "gpu_recovery_action"))
    return {
        "ecc_mode_current": clean(_text(node, "ecc_mode/current_ecc")),
        **_ecc_counts(ecc),
        "retired_pages_sbe": to_int(_text(retired, "multiple_single_bit_retirement/retired_count")),
        "retired_pages_dbe": to_int(_text(retired, "double_bit_retirement/retired_count")),
        # v11+ prints both spellings; either one saying "Yes" means pages wait for a reset.
        "retired_pages_pending": any_flag((_text(retired, "pending_blacklist"),
                                           _text(retired, "pending_retirement"))),
        "remapped_rows_correctable": to_int(_text(remapped, "remapped_row_corr")),
        "remapped_rows_uncorrectable": to_int(_text(remapped, "remapped_row_unc")),
        "remapped_rows_pending": flag(_text(remapped, "remapped_row_pending")),
        "remapped_rows_failure": flag(_text(remapped, "remapped_row_failure")),
        "remapped_rows_banks_none": to_int(_text(remapped, "row_remapper_histogram/row_remapper_histogram_none")),
        "reset_required": reset_required(_text(node, "gpu_reset_status/reset_required"), recovery),
        "recovery_action": recovery,
    }


def _ecc_counts(ecc: ET.Element | None) -> dict:
    counts: dict = {}
    for kind in ("volatile", "aggregate"):
        section = None if ecc is None else ecc.find(kind)
        # Old DTDs: single_bit/double_bit totals. Newer: SRAM and DRAM counts, summed here.
        counts[f"ecc_{kind}_corrected"] = total((
            to_int(_text(section, "single_bit/total")), to_int(_text(section, "sram_correctable")),
            to_int(_text(section, "dram_correctable"))))
        counts[f"ecc_{kind}_uncorrected"] = total((
            to_int(_text(section, "double_bit/total")), to_int(_text(section, "dram_uncorrectable")),
            _sram_uncorrectable(section)))
    # The lifetime (aggregate) count: what RMA guidance for SRAM errors is stated in.
    counts["sram_uncorrectable"] = _sram_uncorrectable(None if ecc is None else ecc.find("aggregate"))
    return counts


def _sram_uncorrectable(section: ET.Element | None) -> int | None:
    return sram_uncorrectable(_text(section, "sram_uncorrectable"),
                              _text(section, "sram_uncorrectable_parity"),
                              _text(section, "sram_uncorrectable_secded"))
