"""A hand-written stand-in ``torch`` package for the tests that run gpuhealth's scripts for real (the
PyTorch probe, TORCH_PROBE_SCRIPT; the active tests, ACTIVE_TEST_SCRIPT): this machine has no PyTorch and no
GPU. It implements only the calls those scripts make, on tiny tensors, two H100s on CUDA 12.1.

``FAKE_TORCH`` in the environment picks a mode: ``ok``; ``wrong`` (cuda:1's matmul is off by 5); ``nan``
(cuda:1's matmul gives NaN); ``memfault`` (cuda:1's memory pattern reads back a flipped bit); ``raise``
(cuda:1's allocation raises an illegal memory access); ``no-cuda`` (no CUDA device); ``old-driver``
(CUDA initialisation warns that the driver is too old); ``broken`` (the import fails on libcudnn).
"""

from __future__ import annotations

from pathlib import Path

FAKE_TORCH = '''
import math, os, random, warnings
MODE = os.environ.get("FAKE_TORCH", "ok")
if MODE == "broken":
    raise OSError("libcudnn.so.9: cannot open shared object file: No such file or directory")
__version__ = "2.3.1+cu121"
uint8, int32 = "uint8", "int32"
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
        return Tensor([list(r) for r in self.rows], device)
    def cpu(self):
        return Tensor(self.rows)
    def pin_memory(self):
        return self
    def copy_(self, src, non_blocking=False):
        self.rows = [list(r) for r in src.rows]
        return self
    def fill_(self, value):
        self.rows = [[value for _ in r] for r in self.rows]
        if self.device == "cuda:1" and MODE == "memfault":
            self.rows[0][3] = value ^ 4
        return self
    def __ne__(self, other):
        rows = other.rows if isinstance(other, Tensor) else [[other] * len(r) for r in self.rows]
        return Tensor([[int(a != b) for a, b in zip(r, s)] for r, s in zip(self.rows, rows)])
    def sum(self):
        return _Scalar(sum(sum(r) for r in self.rows))
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
def empty(n, dtype=None, device="cpu"):
    if device == "cuda:1" and MODE == "raise":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return Tensor([[0] * 8], device)
def arange(n, dtype=None, device="cpu"):
    return Tensor([list(range(8))], device)
class _Props:
    def __init__(self, index):
        self.pci_bus_id, self.pci_domain_id, self.pci_device_id = (0x19, 0x3b)[index], 0, 0
class cuda:
    @staticmethod
    def is_available():
        if MODE == "old-driver":
            warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).")
            return False
        return MODE != "no-cuda"
    device_count = staticmethod(lambda: 0 if MODE == "old-driver" else 2)
    get_arch_list = staticmethod(lambda: ["sm_80", "sm_90"])
    synchronize = staticmethod(lambda index=None: None)
    empty_cache = staticmethod(lambda: None)
    get_device_name = staticmethod(lambda index: "NVIDIA H100 80GB HBM3")
    get_device_capability = staticmethod(lambda index: (9, 0))
    get_device_properties = staticmethod(lambda index: _Props(index))
'''


def install_fake_torch(directory: Path) -> Path:
    """Write the stand-in as ``directory/torch``; put ``directory`` on PYTHONPATH to use it."""
    (directory / "torch").mkdir()
    (directory / "torch" / "__init__.py").write_text(FAKE_TORCH)
    return directory
