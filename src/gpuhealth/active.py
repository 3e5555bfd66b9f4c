"""Active tests (opt-in, ``gpuhealth check --level 2``): measure and exercise each GPU with PyTorch.

Collection only observes; these tests load the GPUs: pinned host<->device copies (bandwidth, GH710),
a float32 matmul compared with the CPU and memory written with patterns and read back (GH711). They
run as ``python3 -c ACTIVE_TEST_SCRIPT <params>`` through ``Host.run``, like the PyTorch probe, so a
bundle records the answer and ``check --from`` replays it. They refuse busy GPUs unless forced: a
test would disturb the job and measure the job's load instead of the GPU.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from gpuhealth.host import Host
from gpuhealth.model import ActiveGpuResult, ActiveResults, ParseError, Snapshot, normalize_pci_address

ACTIVE_LABEL = "python3 -c <gpuhealth active tests>"
BUSY_UTILIZATION_PCT = 10.0
COPY_MIB = 256
MEMORY_MIB = 512
SCRIPT_SHARE = 0.75  # of the budget the script may spend testing; the rest covers start-up and import

# Run as ``python3 -c ACTIVE_TEST_SCRIPT '<json params>'``; prints ONE JSON line. Any Python 3.6+.
ACTIVE_TEST_SCRIPT = r'''
import json, math, os, sys, time
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
start = time.monotonic()
params = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
budget = float(params.get("budget_s", 45))
copy_bytes = int(params.get("copy_mib", 256)) * 1024 * 1024
memory_mib = int(params.get("memory_mib", 512))
out = {"active": 1, "python": sys.version.split()[0]}
def text(exc):
    return ("%s: %s" % (type(exc).__name__, exc))[:2000]
def say():
    out["duration_s"] = round(time.monotonic() - start, 3)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
try:
    import torch
except ImportError as exc:
    out["installed"] = getattr(exc, "name", None) != "torch"
    if out["installed"]:
        out["error"] = text(exc)
    say()
    sys.exit(0)
except Exception as exc:
    out["installed"] = True
    out["error"] = text(exc)
    say()
    sys.exit(0)
out["installed"] = True
out["version"] = str(getattr(torch, "__version__", ""))
def timed_copy(dst, src, index, reps=5):
    dst.copy_(src)
    torch.cuda.synchronize(index)
    began = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize(index)
    return round(copy_bytes * reps / max(time.perf_counter() - began, 1e-9) / 1e9, 2)
try:
    out["available"] = bool(torch.cuda.is_available())
    if out["available"]:
        torch.backends.cuda.matmul.allow_tf32 = False
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(512, 512, generator=gen)
        b = torch.randn(512, 512, generator=gen)
        ref = a @ b
        words = memory_mib * 1024 * 1024 // 4
        patterns = (0, -1, 0x55555555, -0x55555556)  # zeros, ones, 0x55..., 0xAA... as int32
        gpus = []
        for i in range(int(torch.cuda.device_count())):
            dev = {"index": i}
            gpus.append(dev)
            if time.monotonic() - start > budget:
                dev["skipped"] = "the time budget (%g s) was used up" % budget
                continue
            where = "cuda:%d" % i
            try:
                dev["name"] = str(torch.cuda.get_device_name(i))
                props = torch.cuda.get_device_properties(i)
                bus = getattr(props, "pci_bus_id", None)
                if isinstance(bus, int):
                    dev["pci_address"] = "%04x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0) or 0, bus,
                                                               getattr(props, "pci_device_id", 0) or 0)
                host = torch.empty(copy_bytes, dtype=torch.uint8)
                try:
                    host = host.pin_memory()
                    dev["pinned"] = True
                except Exception:
                    dev["pinned"] = False
                device = torch.empty(copy_bytes, dtype=torch.uint8, device=where)
                dev["h2d_gbps"] = timed_copy(device, host, i)
                dev["d2h_gbps"] = timed_copy(host, device, i)
                del host, device
                got = (a.to(where) @ b.to(where)).cpu()
                dev["matmul_nonfinite"] = not bool(torch.isfinite(got).all().item())
                err = float((got - ref).abs().max().item())
                dev["matmul_max_error"] = err if math.isfinite(err) else None
                buf = torch.empty(words, dtype=torch.int32, device=where)
                bad = 0
                for pattern in patterns:
                    buf.fill_(pattern)
                    torch.cuda.synchronize(i)
                    bad += int((buf != pattern).sum().item())
                ramp = torch.arange(words, dtype=torch.int32, device=where)
                buf.copy_(ramp)
                torch.cuda.synchronize(i)
                bad += int((buf != ramp).sum().item())
                dev["memory_tested_mib"] = memory_mib
                dev["memory_mismatches"] = bad
                del buf, ramp
                torch.cuda.empty_cache()
            except Exception as exc:
                dev["error"] = text(exc)
        out["gpus"] = gpus
except Exception as exc:
    out["error"] = text(exc)
say()
'''


def active_argv(budget_s: float) -> list[str]:
    params = {"budget_s": round(max(5.0, budget_s * SCRIPT_SHARE), 1), "copy_mib": COPY_MIB,
              "memory_mib": MEMORY_MIB}
    return ["python3", "-c", ACTIVE_TEST_SCRIPT, json.dumps(params, sort_keys=True)]


def busy_gpus(snapshot: Snapshot) -> list[str]:
    """GPUs with more than 10 % utilization or any process, as "GPU 3 (45 % busy, 2 processes)"."""
    busy = []
    for gpu in snapshot.gpus:
        why = []
        if gpu.utilization_gpu_pct is not None and gpu.utilization_gpu_pct > BUSY_UTILIZATION_PCT:
            why.append(f"{gpu.utilization_gpu_pct:g} % busy")
        if gpu.processes:
            why.append(f"{len(gpu.processes)} process(es)")
        if why:
            busy.append(f"GPU {gpu.index if gpu.index is not None else gpu.pci_address} ({', '.join(why)})")
    return busy


def run_active_tests(host: Host, snapshot: Snapshot, budget_s: float = 60, force: bool = False) -> ActiveResults:
    """Run the active tests on every GPU, or say why not. Never raises for the host's trouble."""
    base = {"forced": force, "budget_s": float(budget_s)}
    if not snapshot.gpus:
        reason = ("no NVIDIA GPU on this host" if not snapshot.nvidia_pci_gpus else
                  "the driver reports no GPU (neither nvidia-smi nor NVML): nothing to test")
        return ActiveResults(ran=False, skipped_reason=reason, **base)
    busy = busy_gpus(snapshot)
    if busy and not force:
        return ActiveResults(ran=False, skipped_reason=f"busy: {', '.join(busy)}; the tests would disturb the "
                                                      "work and measure it: run them when idle, or force them",
                             **base)
    if snapshot.torch is not None and snapshot.torch.installed is False:
        return ActiveResults(ran=False, skipped_reason="PyTorch is not installed for the python3 on PATH", **base)
    run = host.run(active_argv(budget_s), budget_s)
    if run.error == "not installed":
        return ActiveResults(ran=False, skipped_reason="python3 is not on PATH", **base)
    if run.exit_code is None and not run.timed_out:  # never ran: e.g. a bundle captured without them
        return ActiveResults(ran=False, skipped_reason=f"{ACTIVE_LABEL}: {run.error or 'did not run'}", **base)
    if run.timed_out:
        return ActiveResults(ran=True, error=f"{ACTIVE_LABEL} {run.error}: a GPU may hang", **base)
    try:
        data = parse_active_output(run.stdout)
        gpus = tuple(_gpu(d) for d in data.get("gpus") or ())
        duration = _number(data, "duration_s")
    except ParseError as exc:
        last = (run.stderr.strip().splitlines() or [str(exc)])[-1]
        return ActiveResults(ran=True, error=f"{ACTIVE_LABEL} failed (exit {run.exit_code}): {last}", **base)
    if data.get("installed") is False:
        return ActiveResults(ran=False, skipped_reason="PyTorch is not installed for the python3 on PATH", **base)
    if data.get("available") is not True:
        why = data.get("error") or "torch.cuda.is_available() is False"
        return ActiveResults(ran=False, skipped_reason=f"PyTorch cannot use CUDA: {why}",
                             torch_version=data.get("version") or None, **base)
    return ActiveResults(ran=True, duration_s=duration, torch_version=data.get("version") or None, gpus=gpus,
                         error=data.get("error"), **base)


def with_active_tests(host: Host, snapshot: Snapshot, budget_s: float = 60, force: bool = False) -> Snapshot:
    """The snapshot with ``active`` filled in (for ``check --level 2``)."""
    results = run_active_tests(host, snapshot, budget_s, force)
    return dataclasses.replace(snapshot, active=results, sources={**snapshot.sources, "active": ACTIVE_LABEL})


def parse_active_output(text: str) -> dict[str, Any]:
    """The last JSON line holding ``"active"`` that ACTIVE_TEST_SCRIPT printed, checked for shape."""
    if not isinstance(text, str):
        raise ParseError("active test output must be text")
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict) and "active" in data:
            if not isinstance(data.get("gpus", []), list) or not all(isinstance(g, dict) for g in data.get("gpus", [])):
                raise ParseError("active tests: gpus is not a list of objects")
            for key in ("version", "error"):
                if data.get(key) is not None and not isinstance(data[key], str):
                    raise ParseError(f"active tests: {key} is not text")
            return data
    raise ParseError("no JSON line with 'active' from the active tests")


def _number(data: dict[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ParseError(f"active tests: {key} is not a finite number")
    return float(value)


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ParseError(f"active tests: {key} is not text")
    return value


def _flag(data: dict[str, Any], key: str) -> bool | None:
    value = data.get(key)
    if value is not None and not isinstance(value, bool):
        raise ParseError(f"active tests: {key} is not true or false")
    return value


def _gpu(data: dict[str, Any]) -> ActiveGpuResult:
    index = data.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ParseError("active tests: a GPU has no index")
    mismatches = data.get("memory_mismatches")
    if mismatches is not None and (isinstance(mismatches, bool) or not isinstance(mismatches, int)):
        raise ParseError("active tests: memory_mismatches is not a count")
    return ActiveGpuResult(
        index=index, name=_text(data, "name"), pci_address=normalize_pci_address(_text(data, "pci_address")),
        h2d_gbps=_number(data, "h2d_gbps"), d2h_gbps=_number(data, "d2h_gbps"), pinned=_flag(data, "pinned"),
        matmul_max_error=_number(data, "matmul_max_error"), matmul_nonfinite=_flag(data, "matmul_nonfinite"),
        memory_tested_mib=_number(data, "memory_tested_mib"), memory_mismatches=mismatches,
        error=_text(data, "error"), skipped=_text(data, "skipped"),
    )
