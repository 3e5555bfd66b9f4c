"""The NVML probe against fake NVML modules built from driver profiles (no GPU needed).

Each profile mimics what nvidia-ml-py does on a kind of host: a modern driver, an old one whose
library lacks the newer calls, a field the GPU does not support, a lost GPU, a version mismatch.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from gpuhealth import nvml


class FakeNVMLError(Exception):
    def __init__(self, value: int, text: str) -> None:
        super().__init__(text)
        self.value = value


class FakeNvml:
    """Two H100s on a 550-series driver; profiles override pieces of it."""

    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3

    def __init__(self, gpus: int = 2) -> None:
        self.gpus = gpus
        self.shutdown_called = False

    def nvmlInit(self):  # noqa: N802 - NVML's names
        pass

    def nvmlShutdown(self):  # noqa: N802
        self.shutdown_called = True

    def nvmlSystemGetDriverVersion(self):  # noqa: N802
        return "550.90.07"

    def nvmlSystemGetCudaDriverVersion_v2(self):  # noqa: N802
        return 12040

    def nvmlDeviceGetCount(self):  # noqa: N802
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return index

    def nvmlDeviceGetName(self, handle):  # noqa: N802
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetPciInfo(self, handle):  # noqa: N802
        return SimpleNamespace(busId=f"00000000:{0x19 + handle * 0x22:02X}:00.0".encode(), pciDeviceId=0x233010DE)

    def nvmlDeviceGetUUID(self, handle):  # noqa: N802
        return f"GPU-1111111{handle}-2222-3333-4444-555555555555"

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 41 + handle

    def nvmlDeviceGetTemperatureThreshold(self, handle, kind):  # noqa: N802
        return {0: 92, 1: 89, 3: 87}[kind]

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return 71234

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):  # noqa: N802
        return 700000

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        return SimpleNamespace(total=80 * 1024**3, used=512 * 1024**2)

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return SimpleNamespace(gpu=0, memory=0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return 0x1 | 0x40

    def nvmlDeviceGetRemappedRows(self, handle):  # noqa: N802
        return (0, 0, handle == 1, False)

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter):  # noqa: N802
        return 3 if (error_type, counter) == (1, 1) else 0

    def nvmlDeviceGetFanSpeed(self, handle):  # noqa: N802
        raise FakeNVMLError(3, "Not Supported")


def test_modern_driver_reports_every_gpu_and_field():
    fake = FakeNvml()
    answer = nvml.probe(fake)
    assert answer["ok"] is True and answer["driver_version"] == "550.90.07"
    assert answer["cuda_driver_version"] == "12.4"
    first, second = answer["gpus"]
    assert first["pci_address"] == "0000:19:00.0" and second["pci_address"] == "0000:3b:00.0"
    assert first["name"] == "NVIDIA H100 80GB HBM3" and first["pci_device_id"] == "2330"
    assert first["temperature_slowdown_c"] == 89 and first["power_draw_w"] == 71.234
    assert first["clock_event_reasons"] == ["gpu_idle", "hw_thermal_slowdown"]
    assert first["ecc_aggregate_uncorrected"] == 3 and first["ecc_volatile_corrected"] == 0
    assert second["remapped_rows_pending"] is True and first["remapped_rows_pending"] is False
    assert "fan_speed_pct" not in first  # unsupported: absent, not an error
    assert fake.shutdown_called


def test_old_library_without_new_calls_falls_back():
    class OldDriver(FakeNvml):
        nvmlDeviceGetCurrentClocksEventReasons = None  # noqa: N815 - absent before 535

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):  # noqa: N802
            return 0x4

    answer = nvml.probe(OldDriver())
    assert answer["gpus"][0]["clock_event_reasons"] == ["sw_power_cap"]


def test_version_mismatch_at_init_is_reported_with_its_code():
    class Mismatch(FakeNvml):
        def nvmlInit(self):  # noqa: N802
            raise FakeNVMLError(18, "Driver/library version mismatch")

    answer = nvml.probe(Mismatch())
    assert answer == {"ok": False, "error": "Driver/library version mismatch", "error_code": 18}


def test_lost_gpu_fails_the_probe_with_gpu_is_lost():
    class Lost(FakeNvml):
        def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
            raise FakeNVMLError(15, "GPU is lost")

    answer = nvml.probe(Lost())
    assert answer["ok"] is False and answer["error_code"] == 15


def test_a_hanging_nvml_is_cut_off_by_the_timeout():
    class Hangs(FakeNvml):
        def nvmlInit(self):  # noqa: N802
            time.sleep(5)

    started = time.monotonic()
    answer = nvml.probe_with_timeout(0.2, Hangs())
    assert time.monotonic() - started < 2
    assert answer["ok"] is False and "did not answer" in answer["error"]


def test_without_a_gpu_the_real_library_fails_cleanly():
    answer = nvml.probe()  # this machine has no NVIDIA driver
    assert answer["ok"] is False and answer["error"]


def fabric_info_structure() -> type:
    """A ctypes structure with the fields nvidia-ml-py's c_nvmlGpuFabricInfo_t has (made on use: ctypes is not needed
    by the other tests)."""
    import ctypes

    class Info(ctypes.Structure):
        _fields_ = [("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_uint), ("cliqueId", ctypes.c_uint),
                    ("state", ctypes.c_uint)]

    return Info


def test_the_fabric_state_is_read_as_nvidia_smi_prints_it():
    """nvmlDeviceGetGpuFabricInfo fills the structure passed by reference; its state is nvidia-smi -q's Fabric State
    (what GH210 judges in a pasted nvidia-smi -q, so live check and analyze read the same field)."""
    class Fabric(FakeNvml):
        c_nvmlGpuFabricInfo_t = fabric_info_structure()

        def nvmlDeviceGetGpuFabricInfo(self, handle, reference):  # noqa: N802
            if handle == 1:
                raise FakeNVMLError(3, "Not Supported")
            reference._obj.state = 2  # NVML_GPU_FABRIC_STATE_IN_PROGRESS
            return 0

    first, second = nvml.probe(Fabric())["gpus"]
    assert first["fabric_state"] == "In Progress"
    assert "fabric_state" not in second  # refused: unknown, not a state
    assert "fabric_state" not in nvml.probe(FakeNvml())["gpus"][0]  # a library without the call
