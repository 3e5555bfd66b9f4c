"""Build the two examples shipped in examples/ (``make demo`` runs this into demo/, then checks the bundle).

- ``h100x8-xid-ecc.tar.gz``: the README's example host, an 8x H100 whose kernel log holds a double-bit ECC
  error (Xid 48). A bundle recorded from the test host tests/hosts/h100x8-xid-ecc.json: its nvidia-smi -q
  and kernel log are real public captures (tests/data/corpus/gpud, Apache-2.0), the rest is the spec's
  hand-written host (see tests/hosts/README.md).
- ``h100x8.trace``: a GENERATED monitor trace (synthetic values, not recorded from a GPU): 8 H100s sampled
  every 2 seconds for 4 minutes under a training load, GPU 6 heating up to its slowdown temperature and
  throttling. Try it: ``gpuhealth watch --source replay:examples/h100x8.trace``.

Usage: python examples/make_examples.py [OUT_DIR] (default: examples/). Needs only the runtime dependencies.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from gpuhealth.bundle import RecordingHost, write_archive  # noqa: E402
from gpuhealth.collect import collect  # noqa: E402
from gpuhealth.monitor.sample import Event, Sample  # noqa: E402
from gpuhealth.monitor.sources import write_trace  # noqa: E402
from hostcases import FakeHost, load_spec  # noqa: E402

CASE = "h100x8-xid-ecc"
BUNDLE = f"{CASE}.tar.gz"
TRACE = "h100x8.trace"
HOSTNAME = "gpu-node-17"
GENERATED_BY = "examples/make_examples.py"
NOTE = ("GENERATED example: synthetic values, not recorded from a real GPU. 8x H100 under a training load for "
        "4 minutes, sampled every 2 s; GPU 6 heats up to its slowdown temperature and throttles.")
# The PCI addresses of the example bundle's GPUs (tests/hosts/h100x8-xid-ecc.json), so both examples name
# the same host.
PCI = ("0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
       "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0")
T0 = 1_732_708_800.0  # 2024-11-27T12:00:00Z
SECONDS = 240
STEP = 2  # seconds between samples: half the size of a 1 s recording
RAMP = 100  # seconds the hot GPU takes to climb
HOT_GPU = 6
SLOWDOWN_C = 87  # the H100 SXM slowdown temperature NVML reports
SW_THERMAL_SLOWDOWN = 0x20  # NVML clock event reason bits (gpuhealth.nvml.CLOCK_EVENT_BITS)
HW_THERMAL_SLOWDOWN = 0x40


def build_bundle(out: Path) -> Path:
    """Record the test host into a bundle directory, then pack it as ``out`` (.tar.gz)."""
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / CASE
        recorder = RecordingHost(FakeHost(load_spec(CASE)), directory, hostname=HOSTNAME)
        collect(recorder)
        recorder.finish()
        return write_archive(directory, out)


def _sample(t: float, gpu: int, i: int) -> Sample:
    """One GPU's reading at second ``i``: a steady training step with a small periodic wobble; the hot GPU
    (a blocked air inlet, say) climbs from 64 to 89 °C in RAMP seconds and throttles from 87 °C."""
    wobble = math.sin(i / 9 + gpu)
    temperature = 62 + gpu % 3 + 2 * wobble
    sm_clock, reasons, power = 1980.0, 0, 560 + 25 * wobble + 4 * gpu
    if gpu == HOT_GPU:
        temperature = min(89.0, 64 + 25 * i / RAMP) + 0.6 * wobble
        if temperature >= SLOWDOWN_C:
            reasons = SW_THERMAL_SLOWDOWN | (HW_THERMAL_SLOWDOWN if temperature >= 88.5 else 0)
            sm_clock, power = 1410.0, 455 + 10 * wobble
    utilization = 97 + 2 * wobble if sm_clock > 1500 else 99
    return Sample(
        t, gpu, pci_address=PCI[gpu], uuid=f"GPU-{gpu:08x}-e8a1-5c3d-9b7f-example00000",
        temperature_c=round(temperature, 1),
        power_w=round(power, 1), power_limit_w=700.0, utilization_gpu_pct=round(utilization),
        utilization_memory_pct=round(38 + 4 * wobble), memory_used_mib=71_234.0 + 512 * gpu,
        memory_total_mib=81_559.0, sm_clock_mhz=sm_clock, memory_clock_mhz=2619.0,
        clock_event_reasons=reasons, ecc_volatile_uncorrected=0, ecc_volatile_corrected=0,
        remapped_rows_pending=False, pcie_gen=5, pcie_width=16, process_count=1,
        process_memory_mib=70_620.0 + 512 * gpu, processes=((31_400 + gpu, 70_620.0 + 512 * gpu),),
        temperature_slowdown_c=float(SLOWDOWN_C), name="NVIDIA H100 80GB HBM3")


def trace_events() -> list[Event]:
    return [_sample(T0 + i, gpu, i) for i in range(0, SECONDS, STEP) for gpu in range(len(PCI))]


def build_trace(out: Path) -> Path:
    write_trace(out, trace_events(), GENERATED_BY, NOTE)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "examples", help="output directory")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for built in (build_bundle(args.out / BUNDLE), build_trace(args.out / TRACE)):
        print(f"wrote {built} ({built.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
