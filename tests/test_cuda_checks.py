"""GH6xx: the PyTorch probe script run for real, the CUDA/driver table, and the checks' judgements.

The probe script runs in a subprocess with this venv's python, where PyTorch is not installed (the
real "installed": false answer), and against a small hand-written stand-in ``torch`` package that
implements only the calls the script makes (the success, wrong-result, old-driver and broken-import
paths), since this machine has no PyTorch and no GPU.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhealth.checks.cuda import arch_support, hidden_by, is_datacenter
from gpuhealth.checks.engine import run_checks
from gpuhealth.collect import collect
from gpuhealth.knowledge import cuda_drivers
from gpuhealth.model import Snapshot, TorchEnv
from gpuhealth.parsers.cuda import TORCH_PROBE_SCRIPT, parse_torch_probe
from hostcases import FakeHost, load_spec

FAKE_TORCH = '''
import math, os, random, warnings
MODE = os.environ.get("FAKE_TORCH", "ok")
if MODE == "broken":
    raise OSError("libcudnn.so.9: cannot open shared object file: No such file or directory")
__version__ = "2.3.1+cu121"
class _NS:
    pass
version = _NS(); version.cuda = "12.1"
backends = _NS(); backends.cuda = _NS(); backends.cuda.matmul = _NS(); backends.cuda.matmul.allow_tf32 = True
class Generator:
    def manual_seed(self, seed):
        self.random = random.Random(seed)
        return self
class _Scalar:
    def __init__(self, value):
        self.value = value
    def item(self):
        return self.value
class Tensor:
    def __init__(self, rows, device="cpu"):
        self.rows, self.device = rows, device
    def to(self, device):
        return Tensor(self.rows, device)
    def cpu(self):
        return Tensor(self.rows)
    def __matmul__(self, other):
        cols = list(zip(*other.rows))
        out = [[sum(a * b for a, b in zip(r, c)) for c in cols] for r in self.rows]
        if self.device == "cuda:1" and MODE == "wrong":
            out[0][0] += 5.0
        if self.device == "cuda:1" and MODE == "nan":
            out[0][0] = float("nan")
        return Tensor(out, self.device)
    def __sub__(self, other):
        return Tensor([[a - b for a, b in zip(r, s)] for r, s in zip(self.rows, other.rows)])
    def abs(self):
        return Tensor([[abs(a) for a in r] for r in self.rows])
    def max(self):
        return _Scalar(max(max(r) for r in self.rows))
    def all(self):
        return _Scalar(all(all(r) for r in self.rows))
def isfinite(t):
    return Tensor([[math.isfinite(a) for a in r] for r in t.rows])
def randn(*size, generator):
    return Tensor([[generator.random.gauss(0, 1) for _ in range(4)] for _ in range(4)])
def zeros(*size, device="cpu"):
    return Tensor([[0.0]], device)
class cuda:
    @staticmethod
    def is_available():
        if MODE == "old-driver":
            warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).")
            return False
        return True
    device_count = staticmethod(lambda: 0 if MODE == "old-driver" else 2)
    get_arch_list = staticmethod(lambda: ["sm_80", "sm_90"])
    synchronize = staticmethod(lambda index=None: None)
    get_device_name = staticmethod(lambda index: "NVIDIA H100 80GB HBM3")
    get_device_capability = staticmethod(lambda index: (9, 0))
'''


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
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    return tmp_path


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
