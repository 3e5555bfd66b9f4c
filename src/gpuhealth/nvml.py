"""The only module that imports ``pynvml`` (nvidia-ml-py). Every NVML call goes through ``_call``.

``probe()`` returns plain JSON data (an ``NvmlReport`` in ``to_jsonable`` form) so that a bundle can
store it and replay it. A field the GPU does not support is simply absent; an NVML failure becomes
``ok: False`` with NVML's own message and return code, which the checks decode.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gpuhealth.model import Gpu, GpuProcess, NvmlReport, normalize_pci_address, to_jsonable

MIB = 1024 * 1024
# nvmlMemoryErrorType_t and nvmlEccCounterType_t values (nvml.h)
CORRECTED, UNCORRECTED = 0, 1
VOLATILE, AGGREGATE = 0, 1

# NVML clock-event reason bits (nvml.h), named as the parsers name them.
CLOCK_EVENT_BITS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}


class _Unsupported(Exception):
    pass


def _load_module() -> Any:
    import pynvml  # the one place it is imported

    return pynvml


def probe_with_timeout(timeout: float, module: Any = None) -> dict[str, Any]:
    """``probe`` in a worker thread: a wedged GPU can hang NVML, and that is itself a finding."""
    result: dict[str, Any] = {}

    def work() -> None:
        result.update(probe(module))

    worker = threading.Thread(target=work, name="gpuhealth-nvml", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return {"ok": False, "error": f"NVML did not answer within {timeout:g} s", "error_code": 10}
    return result


def probe(module: Any = None) -> dict[str, Any]:
    """Ask NVML for the driver and every GPU. Never raises."""
    try:
        nvml = module if module is not None else _load_module()
    except ImportError as exc:
        return to_jsonable(NvmlReport(ok=False, error=f"nvidia-ml-py not importable: {exc}"))
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError, or OSError-like failures to load libnvidia-ml
        return to_jsonable(NvmlReport(ok=False, error=_message(exc), error_code=_code(exc)))
    try:
        return to_jsonable(_report(nvml))
    except Exception as exc:
        return to_jsonable(NvmlReport(ok=False, error=_message(exc), error_code=_code(exc)))
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def _message(exc: BaseException) -> str:
    text = str(exc)
    if "libnvidia-ml" in text or "NVML Shared Library Not Found" in text:
        return "NVML Shared Library Not Found"
    return text or type(exc).__name__


def _code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _call(function: Callable[..., Any] | None, *args: Any) -> Any:
    """One NVML call; an unsupported or failing field is None, never an exception."""
    if function is None:
        return None
    try:
        value = function(*args)
    except Exception:
        return None
    return value.decode() if isinstance(value, bytes) else value


def _report(nvml: Any) -> NvmlReport:
    fn = lambda name: getattr(nvml, name, None)  # noqa: E731 - short local accessor
    cuda = _call(fn("nvmlSystemGetCudaDriverVersion_v2")) or _call(fn("nvmlSystemGetCudaDriverVersion"))
    count = nvml.nvmlDeviceGetCount()
    gpus = tuple(_gpu(nvml, fn, index) for index in range(count))
    return NvmlReport(
        ok=True,
        driver_version=_call(fn("nvmlSystemGetDriverVersion")),
        nvml_version=_call(fn("nvmlSystemGetNVMLVersion")),
        cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
        gpus=gpus,
    )


def _gpu(nvml: Any, fn: Callable[[str], Any], index: int) -> Gpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    const = lambda name, default: getattr(nvml, name, default)  # noqa: E731

    def threshold(kind: str, default: int) -> float | None:
        return _call(fn("nvmlDeviceGetTemperatureThreshold"), handle, const(kind, default))

    pci = _call(fn("nvmlDeviceGetPciInfo"), handle)
    memory = _call(fn("nvmlDeviceGetMemoryInfo"), handle)
    utilization = _call(fn("nvmlDeviceGetUtilizationRates"), handle)
    reasons = _call(fn("nvmlDeviceGetCurrentClocksEventReasons"), handle)
    if reasons is None:
        reasons = _call(fn("nvmlDeviceGetCurrentClocksThrottleReasons"), handle)
    remapped = _call(fn("nvmlDeviceGetRemappedRows"), handle)
    histogram = _call(fn("nvmlDeviceGetRowRemapperHistogram"), handle) if remapped is not None else None
    mig = _call(fn("nvmlDeviceGetMigMode"), handle)
    ecc_mode = _call(fn("nvmlDeviceGetEccMode"), handle)
    bus_id = getattr(pci, "busId", None)
    bus_id = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
    device_id = getattr(pci, "pciDeviceId", None)

    def ecc(error_type: int, counter: int) -> int | None:
        return _call(fn("nvmlDeviceGetTotalEccErrors"), handle, error_type, counter)

    def watts(name: str) -> float | None:
        milliwatts = _call(fn(name), handle)
        return milliwatts / 1000 if isinstance(milliwatts, (int, float)) else None

    return Gpu(
        index=index,
        name=_call(fn("nvmlDeviceGetName"), handle),
        pci_address=normalize_pci_address(bus_id),
        uuid=_call(fn("nvmlDeviceGetUUID"), handle),
        serial=_call(fn("nvmlDeviceGetSerial"), handle),
        pci_device_id=f"{device_id >> 16:04x}" if isinstance(device_id, int) else None,
        vbios_version=_call(fn("nvmlDeviceGetVbiosVersion"), handle),
        persistence_mode=_bool(_call(fn("nvmlDeviceGetPersistenceMode"), handle)),
        mig_mode_current=_enabled(mig[0]) if isinstance(mig, (tuple, list)) else None,
        mig_mode_pending=_enabled(mig[1]) if isinstance(mig, (tuple, list)) else None,
        temperature_c=_call(fn("nvmlDeviceGetTemperature"), handle, const("NVML_TEMPERATURE_GPU", 0)),
        temperature_shutdown_c=threshold("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
        temperature_slowdown_c=threshold("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
        temperature_max_operating_c=threshold("NVML_TEMPERATURE_THRESHOLD_GPU_MAX", 3),
        power_draw_w=watts("nvmlDeviceGetPowerUsage"),
        power_limit_w=watts("nvmlDeviceGetEnforcedPowerLimit"),
        power_default_limit_w=watts("nvmlDeviceGetPowerManagementDefaultLimit"),
        fan_speed_pct=_call(fn("nvmlDeviceGetFanSpeed"), handle),
        clock_event_reasons=tuple(name for bit, name in CLOCK_EVENT_BITS.items()
                                  if isinstance(reasons, int) and reasons & bit),
        memory_total_mib=memory.total / MIB if memory is not None else None,
        memory_used_mib=memory.used / MIB if memory is not None else None,
        utilization_gpu_pct=getattr(utilization, "gpu", None),
        utilization_memory_pct=getattr(utilization, "memory", None),
        processes=tuple(
            GpuProcess(pid=getattr(p, "pid", None), used_memory_mib=(
                p.usedGpuMemory / MIB if isinstance(getattr(p, "usedGpuMemory", None), int) else None))
            for p in _call(fn("nvmlDeviceGetComputeRunningProcesses"), handle) or ()),
        pcie_gen_current=_call(fn("nvmlDeviceGetCurrPcieLinkGeneration"), handle),
        pcie_gen_max=_call(fn("nvmlDeviceGetMaxPcieLinkGeneration"), handle),
        pcie_width_current=_call(fn("nvmlDeviceGetCurrPcieLinkWidth"), handle),
        pcie_width_max=_call(fn("nvmlDeviceGetMaxPcieLinkWidth"), handle),
        ecc_mode_current=_enabled(ecc_mode[0]) if isinstance(ecc_mode, (tuple, list)) else None,
        ecc_volatile_corrected=ecc(CORRECTED, VOLATILE),
        ecc_volatile_uncorrected=ecc(UNCORRECTED, VOLATILE),
        ecc_aggregate_corrected=ecc(CORRECTED, AGGREGATE),
        ecc_aggregate_uncorrected=ecc(UNCORRECTED, AGGREGATE),
        retired_pages_pending=_bool(_call(fn("nvmlDeviceGetRetiredPagesPendingStatus"), handle)),
        remapped_rows_correctable=remapped[0] if isinstance(remapped, (tuple, list)) else None,
        remapped_rows_uncorrectable=remapped[1] if isinstance(remapped, (tuple, list)) else None,
        remapped_rows_pending=_bool(remapped[2]) if isinstance(remapped, (tuple, list)) else None,
        remapped_rows_failure=_bool(remapped[3]) if isinstance(remapped, (tuple, list)) else None,
        remapped_rows_banks_none=_count(getattr(histogram, "none", None)),
        **_fabric(fn, handle),
        source="NVML",
    )


# nvmlGpuFabricState_t as nvidia-smi -q prints it ("Fabric / State"): NVML_GPU_FABRIC_STATE_NOT_SUPPORTED (0, a GPU
# outside an NVSwitch fabric) .. NVML_GPU_FABRIC_STATE_COMPLETED (3, registered with the fabric)
_FABRIC_STATES = {0: "N/A", 1: "Not Started", 2: "In Progress", 3: "Completed"}


def _fabric(fn: Callable[[str], Any], handle: Any) -> dict[str, str | None]:
    """The GPU's NVLink fabric registration (nvmlDeviceGetGpuFabricInfo, R525 and newer), as nvidia-smi -q shows it:
    its state, and for a completed one its status ("Success", or NVML's string for the error it ended with); nothing
    where the library lacks the call or the driver refuses it."""
    struct, call = fn("c_nvmlGpuFabricInfo_t"), fn("nvmlDeviceGetGpuFabricInfo")
    if struct is None or call is None:
        return {}
    import ctypes  # only here: the call fills a structure the caller passes by reference

    try:
        info = struct()
        reference = ctypes.byref(info)
    except Exception:
        return {}
    if _call(call, handle, reference) is None:
        return {}
    state = _FABRIC_STATES.get(getattr(info, "state", None))
    status = getattr(info, "status", None)
    if state != "Completed" or not isinstance(status, int):
        return {"fabric_state": state}  # the status is to be read only once the registration completed (NVML)
    said = "Success" if status == 0 else _call(fn("nvmlErrorString"), status)
    return {"fabric_state": state, "fabric_status": said if isinstance(said, str) else f"NVML error {status}"}


def _bool(value: Any) -> bool | None:
    return bool(value) if isinstance(value, int) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _enabled(value: Any) -> str | None:
    return ("Enabled" if value else "Disabled") if isinstance(value, int) else None
