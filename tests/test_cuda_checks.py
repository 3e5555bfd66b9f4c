"""GH6xx: the PyTorch probe script run for real, the CUDA/driver table, and the checks' judgements.

The probe script runs in a subprocess with this venv's python, where PyTorch is not installed (the
real "installed": false answer), and against a small hand-written stand-in ``torch`` package
(``tests/fake_torch.py``, shared with the active tests) that implements only the calls the script makes
(the success, wrong-result, old-driver and broken-import paths), since this machine has no PyTorch and
no GPU.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_torch import install_fake_torch
from gpuhealth.checks.cuda import arch_support, hidden_by, is_datacenter
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.knowledge import cuda_drivers
from gpuhealth.model import Snapshot, TorchEnv
from gpuhealth.parsers.cuda import TORCH_PROBE_SCRIPT, parse_torch_probe
from hostcases import FakeHost, load_spec


def _run_probe(extra_path: Path | None = None, mode: str = "ok") -> TorchEnv:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    env["FAKE_TORCH"] = mode
    run = subprocess.run([sys.executable, "-c", TORCH_PROBE_SCRIPT], capture_output=True, text=True, timeout=60,
                         env=env, cwd=extra_path or None)
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.strip().splitlines()) == 1, run.stdout
    return parse_torch_probe(run.stdout)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed in this venv")
def test_probe_script_without_torch_says_not_installed():
    env = _run_probe()
    assert env.installed is False
    assert env.python_executable and env.python_version == sys.version.split()[0]


@pytest.fixture()
def fake_torch(tmp_path):
    return install_fake_torch(tmp_path)


def test_probe_script_success_path(fake_torch):
    env = _run_probe(fake_torch)
    assert env.installed and env.cuda_available and env.torch_version == "2.3.1+cu121"
    assert env.torch_cuda_version == "12.1" and env.device_count == 2 and env.arch_list == ("sm_80", "sm_90")
    assert [d.capability for d in env.devices] == ["9.0", "9.0"]
    assert all(d.matmul_max_error == 0.0 and d.matmul_nonfinite is False for d in env.devices)
    assert env.first_cuda_call_s is not None and env.error is None


@pytest.mark.parametrize("mode", ["wrong", "nan"])
def test_probe_script_reports_a_wrong_gpu(fake_torch, mode):
    env = _run_probe(fake_torch, mode)
    good, bad = env.devices
    assert good.matmul_max_error == 0.0
    assert (bad.matmul_max_error or 0) > 1 if mode == "wrong" else bad.matmul_nonfinite is True


def test_probe_script_old_driver_warning(fake_torch):
    env = _run_probe(fake_torch, "old-driver")
    assert env.cuda_available is False and env.device_count == 0
    assert env.init_warning.startswith("CUDA initialization: The NVIDIA driver on your system is too old")


def test_probe_script_broken_import(fake_torch):
    env = _run_probe(fake_torch, "broken")
    assert env.installed is True and env.cuda_available is None
    assert env.error.startswith("OSError: libcudnn.so.9")


# --------------------------------------------------------------------------- the table


def test_cuda_driver_table_has_a_source_per_row():
    path = Path(cuda_drivers.__file__).with_name("cuda_drivers.csv")
    rows = list(csv.DictReader(path.open()))
    assert rows and all(r["source"].strip() and r["driver_min"].strip() for r in rows)
    assert {r["cuda"] for r in rows if r["kind"] == "family"} == {"11", "12", "13"}


@pytest.mark.parametrize(("toolkit", "driver"), [
    ("12.4.131", "550.54.14"), ("12.2.2", "535.54.03"), ("13.0", "580.65.06"), ("11.0.2", "450.51.05"),
    ("10.2.89", "440.33"), ("8.0.61", "367.48")])
def test_toolkit_requirement_uses_the_ga_row(toolkit, driver):
    assert cuda_drivers.requirement(toolkit).driver_min == driver


def test_family_minimums():
    assert cuda_drivers.family_minimum("12.8").driver_min == "525"
    assert cuda_drivers.family_minimum("13.1.0").driver_min == "580"
    assert cuda_drivers.family_minimum("10.2") is None
    assert cuda_drivers.requirement("12.7") is None  # never released as a toolkit
    assert cuda_drivers.requirement("14.0") is None


# --------------------------------------------------------------------------- judgements


@pytest.mark.parametrize(("value", "count", "hidden"), [
    ("0", 8, False), ("0,1,2,3", 8, False), ("7", 8, False), ("", 8, True), ("none", 8, True), ("-1", 8, True),
    ("8", 8, True), ("0,9", 8, True), ("all", 8, True), ("GPU-1234", 8, False), ("MIG-abcd", 8, False)])
def test_cuda_visible_devices(value, count, hidden):
    assert (hidden_by("CUDA_VISIBLE_DEVICES", value, count, ()) is not None) is hidden


def test_visible_devices_unknown_uuid_and_container_values():
    assert hidden_by("CUDA_VISIBLE_DEVICES", "GPU-dead", 2, ("GPU-1234abcd", "GPU-5678")) is not None
    assert hidden_by("CUDA_VISIBLE_DEVICES", "GPU-1234", 2, ("GPU-1234abcd", "GPU-5678")) is None
    assert hidden_by("NVIDIA_VISIBLE_DEVICES", "all", 2, ()) is None
    assert hidden_by("NVIDIA_VISIBLE_DEVICES", "void", 2, ()) is not None


@pytest.mark.parametrize(("capability", "arch", "support"), [
    ("9.0", ("sm_80", "sm_90"), "native"),
    ("8.6", ("sm_80", "sm_90"), "native"),  # an sm_80 cubin runs on 8.6
    ("8.0", ("sm_86",), None),
    ("12.0", ("sm_50", "sm_80", "sm_90"), None),
    ("12.0", ("sm_90", "sm_100", "sm_120"), "native"),
    ("12.0", ("sm_90", "compute_90"), "ptx"),
    ("10.0", ("sm_90a", "sm_100a"), "native"),
])
def test_arch_support(capability, arch, support):
    assert arch_support(capability, arch) == support


@pytest.mark.parametrize(("name", "datacenter"), [
    ("NVIDIA H100 80GB HBM3", True), ("NVIDIA A100-SXM4-40GB", True), ("Tesla V100-PCIE-16GB", True),
    ("NVIDIA L40S", True), ("NVIDIA A10", True), ("NVIDIA GeForce RTX 5090", False), ("NVIDIA RTX A5000", False),
    ("Quadro RTX 8000", False), (None, False)])
def test_is_datacenter(name, datacenter):
    assert is_datacenter(name) is datacenter


def _codes(snapshot: Snapshot) -> tuple[dict[str, str], dict[str, str]]:
    report = run_checks(snapshot, select=[f"GH60{i}" for i in range(1, 10)])
    return ({f.code: f.severity.value for f in report.findings}, {s.code: s.reason for s in report.skipped})


def test_torch_not_installed_is_skipped_not_passed():
    spec = load_spec("h100x8-healthy")
    spec["commands"]["python3 -c <torch-probe>"] = {"stdout": '{"probe": 1, "installed": false}\n'}
    fired, skipped = _codes(collect(FakeHost(spec)))
    assert not fired
    assert {"GH605", "GH606", "GH607", "GH609"} <= set(skipped)
    assert "not installed" in skipped["GH605"]


def test_probe_timeout_is_reported_as_slow():
    spec = load_spec("h100x8-healthy")
    spec["commands"]["python3 -c <torch-probe>"] = {"timed_out": True}
    snapshot = collect(FakeHost(spec))
    assert snapshot.torch is None and "timed out after 60 s" in snapshot.unavailable["torch"]
    fired, skipped = _codes(snapshot)
    assert fired == {"GH609": "info"}
    assert "GH605" in skipped


def test_unreadable_probe_output_is_unavailable():
    spec = load_spec("h100x8-healthy")
    spec["commands"]["python3 -c <torch-probe>"] = {"stdout": "", "stderr": "Segmentation fault\n", "exit_code": 139}
    snapshot = collect(FakeHost(spec))
    assert snapshot.unavailable["torch"].endswith("failed (exit 139): Segmentation fault")


def test_collect_env_evidence_is_judged_too():
    """A pasted collect_env (analyze) with a CPU-only wheel on a host whose driver is known."""
    torch = TorchEnv(torch_version="2.1.0+cpu", torch_cuda_version=None, cuda_available=False,
                     driver_version="535.104.05")
    fired, _ = _codes(Snapshot(origin="evidence", torch=torch))
    assert fired == {"GH605": "critical"}


def test_root_causes_fold_the_torch_finding():
    from gpuhealth.report.common import fold

    for case, root in (("h100x8-cuda-after-install-broken", "GH603"), ("a100x8-cuda-visible-devices-empty", "GH608")):
        report = run_checks(collect(FakeHost(load_spec(case))))
        cause = next(c for c in fold(report.findings) if c.finding.code == root)
        assert [s.code for s in cause.symptoms] == ["GH605"]
        assert root in next(f for f in report.findings if f.code == "GH605").message


def test_a_busy_gpu_is_not_a_wrong_gpu():
    from gpuhealth.model import TorchDevice

    busy = TorchDevice(0, "NVIDIA H100 80GB HBM3", "9.0",
                       error="RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable")
    torch = TorchEnv(torch_version="2.3.1+cu121", torch_cuda_version="12.1", cuda_available=True, installed=True,
                     arch_list=("sm_90",), devices=(busy,))
    fired, _ = _codes(Snapshot(torch=torch))
    assert "GH607" not in fired


def test_no_frameworks_skips_the_torch_probe_and_says_so():
    from gpuhealth.collect import collect
    from hostcases import FakeHost, load_spec

    snapshot = collect(FakeHost(load_spec("h100x8-healthy")), frameworks=False)
    assert snapshot.torch is None
    assert "not run" in snapshot.unavailable["torch"]
    assert snapshot.cuda is not None  # the rest of the CUDA evidence is still collected


# --------------------------------------------------------------------------- JAX, CuPy, TensorFlow (GH610)

# Hand-written stand-ins for the calls the framework probe makes, nothing more. FAKE_FW picks the story:
# "ok" (2 GPUs, exact), "wrong" (GPU 1 off by 5 in every framework), "cpu" (JAX: CPU-only jaxlib; CuPy:
# cudaErrorInsufficientDriver; TensorFlow: a CUDA build that cannot load its libraries), "broken" (imports fail).
FAKE_ARRAY = '''
import os
MODE = os.environ.get("FAKE_FW", "ok")
float32 = "float32"
class Array:
    def __init__(self, rows, device=0):
        self.rows, self.device = [[float(x) for x in r] for r in rows], device
    def tolist(self):
        return [list(r) for r in self.rows]
    def numpy(self):
        return self
def matmul(a, b, device=None):
    device = a.device if device is None else device
    cols = list(zip(*b.rows))
    out = [[sum(x * y for x, y in zip(r, c)) for c in cols] for r in a.rows]
    if MODE == "wrong" and device == 1:
        out[2][3] += 5.0
    return Array(out, device)
'''
FAKE_JAX = '''
import logging, os
from _fakearray import MODE, Array
if MODE == "broken":
    raise ImportError("jaxlib is version 0.4.20, but this version of jax requires version >= 0.4.30.")
__version__ = "0.4.30"
class Device:
    def __init__(self, i):
        self.id, self.device_kind = i, "NVIDIA H100 80GB HBM3"
def default_backend():
    if MODE == "cpu":
        logging.getLogger("jax._src.xla_bridge").warning(
            "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. "
            "Falling back to cpu.")
        return "cpu"
    return "gpu"
def devices(kind=None):
    if MODE == "cpu":
        raise RuntimeError("Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are present.")
    return [Device(0), Device(1)]
def device_put(x, device):
    return Array(x.rows, device.id)
'''
FAKE_JNP = '''
from _fakearray import Array, float32, matmul
def asarray(rows, dtype=None):
    return Array(rows)
'''
FAKE_CUPY = '''
import types
from _fakearray import MODE, Array, float32, matmul as _matmul
if MODE == "broken":
    raise ImportError("libnvrtc.so.12: cannot open shared object file: No such file or directory")
__version__ = "13.3.0"
_current = [0]
class CUDARuntimeError(RuntimeError):
    pass
def _count():
    if MODE == "cpu":
        raise CUDARuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
                               "runtime version")
    return 2
runtime = types.SimpleNamespace(
    runtimeGetVersion=lambda: 12040, driverGetVersion=lambda: 11040 if MODE == "cpu" else 12020,
    getDeviceCount=_count, getDeviceProperties=lambda i: {"name": b"NVIDIA H100 80GB HBM3"})
class Device:
    def __init__(self, i):
        self.i = i
    def __enter__(self):
        _current[0] = self.i
    def __exit__(self, *exc):
        _current[0] = 0
cuda = types.SimpleNamespace(runtime=runtime, Device=Device)
def asarray(rows, dtype=None):
    return Array(rows, _current[0])
def matmul(a, b):
    return _matmul(a, b)
'''
FAKE_TF = '''
import os, types
from _fakearray import MODE, Array, float32, matmul
if MODE == "broken":
    raise ImportError("libcudart.so.12: cannot open shared object file")
__version__ = "2.16.1"
_current = [0]
sysconfig = types.SimpleNamespace(get_build_info=lambda: {"cuda_version": "12.3", "cudnn_version": "8",
                                                           "is_cuda_build": True})
test = types.SimpleNamespace(is_built_with_cuda=lambda: True)
def _list(kind):
    if MODE == "cpu":
        os.write(2, b"Cannot dlopen some GPU libraries. Please make sure the missing libraries mentioned above "
                    b"are installed properly if you would like to use GPU.\\n")
        return []
    return ["/physical_device:GPU:0", "/physical_device:GPU:1"]
config = types.SimpleNamespace(list_physical_devices=_list, experimental=types.SimpleNamespace(
    set_memory_growth=lambda gpu, on: None, get_device_details=lambda gpu: {"device_name": "NVIDIA H100 80GB HBM3"}))
class device:
    def __init__(self, name):
        self.index = int(name.rsplit(":", 1)[1])
    def __enter__(self):
        _current[0] = self.index
    def __exit__(self, *exc):
        _current[0] = 0
def constant(rows, dtype=None):
    return Array(rows, _current[0])
linalg = types.SimpleNamespace(matmul=matmul)
'''


@pytest.fixture()
def fake_frameworks(fake_torch):
    (fake_torch / "_fakearray.py").write_text(FAKE_ARRAY)
    for package, text in (("jax", FAKE_JAX), ("cupy", FAKE_CUPY), ("tensorflow", FAKE_TF)):
        (fake_torch / package).mkdir()
        (fake_torch / package / "__init__.py").write_text(text)
    (fake_torch / "jax" / "numpy.py").write_text(FAKE_JNP)
    (fake_torch / "jaxlib").mkdir()
    (fake_torch / "jaxlib" / "__init__.py").write_text('__version__ = "0.4.30"\n')
    return fake_torch


def _run_frameworks(path: Path, mode: str, plugin: bool = True):
    if plugin:
        (path / "jax_cuda12_plugin").mkdir(exist_ok=True)
        (path / "jax_cuda12_plugin" / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(path), FAKE_FW=mode, FAKE_TORCH="ok")
    run = subprocess.run([sys.executable, "-c", TORCH_PROBE_SCRIPT], capture_output=True, text=True, timeout=60,
                         env=env, cwd=path)
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.strip().splitlines()) == 1, run.stdout
    return run.stdout, {fw.name: fw for fw in parse_torch_probe(run.stdout).frameworks}


def test_probe_without_frameworks_says_not_installed():
    env = _run_probe()
    assert [(fw.name, fw.installed) for fw in env.frameworks] == [("jax", False), ("cupy", False),
                                                                    ("tensorflow", False)]


def test_probe_frameworks_success(fake_frameworks):
    _, fws = _run_frameworks(fake_frameworks, "ok")
    jax, cupy, tf = fws["jax"], fws["cupy"], fws["tensorflow"]
    assert jax.installed and jax.version == "0.4.30" and jax.library_version == "0.4.30"
    assert jax.cuda_version == "12" and jax.cuda_build and jax.backend == "gpu"
    assert cupy.cuda_version == "12.4" and cupy.driver_cuda_version == "12.2"
    assert tf.cuda_version == "12.3" and tf.cudnn_version == "8" and tf.cuda_build
    for fw in fws.values():
        assert fw.device_count == 2 and fw.error is None and fw.gpu_error is None
        assert [(d.name, d.matmul_max_error, d.matmul_nonfinite) for d in fw.devices] == [
            ("NVIDIA H100 80GB HBM3", 0.0, False)] * 2


def _frameworks_snapshot(stdout: str) -> Snapshot:
    spec = load_spec("h100x8-healthy")
    spec["commands"]["python3 -c <torch-probe>"] = {"stdout": stdout}
    return collect(FakeHost(spec))


def _gh610(snapshot: Snapshot):
    report = run_checks(snapshot, select=["GH610"])
    return report.findings, {s.code: s.reason for s in report.skipped}


def test_frameworks_that_cannot_use_the_gpus_say_why(fake_frameworks):
    stdout, fws = _run_frameworks(fake_frameworks, "cpu", plugin=False)
    assert fws["jax"].cuda_build is False and fws["jax"].backend == "cpu"
    assert any("CUDA-enabled jaxlib is not installed" in m for m in fws["jax"].messages)  # from logging
    assert "cudaErrorInsufficientDriver" in fws["cupy"].gpu_error and fws["cupy"].driver_cuda_version == "11.4"
    assert any("Cannot dlopen some GPU libraries" in m for m in fws["tensorflow"].messages)  # from fd 2
    findings, _ = _gh610(_frameworks_snapshot(stdout))
    by_name = {f.message.split()[0]: f for f in findings}
    assert {f.severity.value for f in findings} == {"warning"}
    assert "CPU-only jaxlib" in by_name["JAX"].message
    # the fake CuPy's driver says CUDA 11.4 while this host's 535 driver supports 12.2: the host's evidence
    # leads, so the finding falls back to CuPy's own message, quoted
    assert "driver too old for its CUDA" in by_name["CuPy"].message
    assert any("cudaErrorInsufficientDriver" in line for line in by_name["CuPy"].evidence[0].lines)
    assert "could not load those libraries" in by_name["TensorFlow"].message
    assert any("jax[cuda12]" in fix.command for fix in by_name["JAX"].fixes)


def test_cupy_newer_than_the_driver_is_named():
    """CuPy's CUDA 13 runtime on driver 535 (CUDA 12.2): the family minimum decides."""
    from gpuhealth.model import FrameworkEnv

    cupy = FrameworkEnv("cupy", True, version="14.0.0", cuda_version="13.0", cuda_build=True,
                        driver_cuda_version="12.2", device_count=0,
                        gpu_error="CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    spec = load_spec("h100x8-healthy")
    snapshot = collect(FakeHost(spec))
    snapshot = dataclasses.replace(snapshot, torch=dataclasses.replace(snapshot.torch, frameworks=(cupy,)))
    (finding,), _ = _gh610(snapshot)
    assert "CuPy uses CUDA runtime 13.0" in finding.message and "needs driver >= 580" in finding.message


def test_a_framework_computing_wrong_is_critical(fake_frameworks):
    stdout, fws = _run_frameworks(fake_frameworks, "wrong")
    assert all(fw.devices[1].matmul_max_error == 5.0 for fw in fws.values())
    findings, _ = _gh610(_frameworks_snapshot(stdout))
    assert len(findings) == 3 and {f.severity.value for f in findings} == {"critical"}
    assert all("GPU 1" in f.evidence[0].lines[0] for f in findings)


def test_a_framework_that_fails_to_import(fake_frameworks):
    stdout, fws = _run_frameworks(fake_frameworks, "broken")
    assert fws["jax"].error.startswith("ImportError: jaxlib is version 0.4.20")
    findings, _ = _gh610(_frameworks_snapshot(stdout))
    assert {f.severity.value for f in findings} == {"warning"} and len(findings) == 3


def test_gh610_skips_without_framework_answers():
    from gpuhealth.model import FrameworkEnv

    _, skipped = _gh610(Snapshot(origin="evidence", torch=TorchEnv(torch_version="2.1.0", cuda_available=True)))
    assert "no JAX, CuPy or TensorFlow" in skipped["GH610"]
    snapshot = collect(FakeHost(load_spec("h100x8-healthy")))
    late = FrameworkEnv("tensorflow", True, skipped="not probed: the probe had already run 41 s")
    snapshot = dataclasses.replace(snapshot, torch=dataclasses.replace(snapshot.torch, frameworks=(late,)))
    findings, skipped = _gh610(snapshot)
    assert not findings and "41 s" in skipped["GH610"]


# --------------------------------------------------------------------------- GSP firmware (GH611)


def _gh611(spec: dict) -> tuple[list, dict[str, str]]:
    report = run_checks(collect(FakeHost(spec)), select=["GH611"])
    return report.findings, {s.code: s.reason for s in report.skipped}


def test_gsp_firmware_missing_on_the_proprietary_module_is_a_warning():
    spec = load_spec("h100x8-healthy")
    spec["listings"]["/lib/firmware/nvidia/535.161.08"] = ["README"]
    (finding,), _ = _gh611(spec)
    assert finding.severity.value == "warning"
    assert "/lib/firmware/nvidia/535.161.08 holds no gsp*.bin" in finding.message
    spec["files"]["/proc/driver/nvidia/params"] = "EnableMSI: 1\nEnableGpuFirmware: 0\n"
    findings, _ = _gh611(spec)
    assert not findings  # GSP turned off on purpose


def test_gsp_firmware_is_not_asked_of_old_gpus_or_old_drivers():
    spec = load_spec("h100x8-healthy")
    del spec["listings"]["/lib/firmware/nvidia"]
    for pci in spec["pci"]:
        pci["device"] = "1db4"  # Volta: no GSP
    spec["nvml"] = {"ok": True, "driver_version": "535.161.08", "gpus": []}
    del spec["commands"]["nvidia-smi -q"]  # its H100s would be looked up too
    findings, skipped = _gh611(spec)
    assert not findings and "GH611" not in skipped
    spec = load_spec("h100x8-healthy")
    del spec["listings"]["/lib/firmware/nvidia"]
    spec["files"]["/proc/driver/nvidia/version"] = spec["files"]["/proc/driver/nvidia/version"].replace(
        "535.161.08", "470.223.02")
    findings, _ = _gh611(spec)
    assert not findings


def test_unreadable_firmware_folder_is_skipped_not_passed():
    from gpuhealth.host import Listing

    class Denied(FakeHost):
        def listdir(self, path):
            if path.startswith("/lib/firmware"):
                return Listing(path, error="permission denied: run as root")
            return super().listdir(path)

    report = run_checks(collect(Denied(load_spec("h100x8-healthy"))), select=["GH611"])
    assert not report.findings
    assert "permission denied" in {s.code: s.reason for s in report.skipped}["GH611"]


def test_missing_firmware_is_the_root_of_rminit_failures():
    from gpuhealth.report.common import fold

    report = run_checks(collect(FakeHost(load_spec("l40sx2-open-gsp-firmware-missing"))))
    cause = next(c for c in fold(report.findings) if c.finding.code == "GH611")
    # GH303 (RmInitAdapter failed) folds under it, and with it what GH303 explains (GPUs missing, queries failing)
    assert {s.code for s in cause.symptoms} == {"GH303", "GH102", "GH203"}
    assert fold(report.findings)[0].finding.code == "GH611"
    assert "550.107.02 only" in cause.finding.message
