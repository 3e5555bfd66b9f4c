"""After-the-install evidence: ``nvcc --version``, a toolkit's ``version.json``/``version.txt``,
``ldconfig -p``, ``systemctl is-active/is-enabled``, ld.so.conf files, and the PyTorch probe.

The PyTorch probe is a script run as ``python3 -c TORCH_PROBE_SCRIPT`` by the host's own python3; it
prints one JSON line, which ``parse_torch_probe`` reads. Both live here so the format has one home.
The corpus holds none of these outputs: the shapes follow the tools' documented output.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import FrameworkDevice, FrameworkEnv, LibraryEntry, ParseError, TorchDevice, TorchEnv
from gpuhealth.parsers._text import text_lines

# --------------------------------------------------------------------------- nvcc --version

_NVCC = lazy_re(r"Cuda compilation tools,\s*release\s+(?P<release>\d+\.\d+)(?:,\s*V(?P<version>\d+(?:\.\d+)+))?")


def parse_nvcc_version(text: str) -> tuple[str, str | None]:
    """``Cuda compilation tools, release 12.4, V12.4.131`` -> ("12.4", "12.4.131")."""
    if not isinstance(text, str):
        raise ParseError("nvcc output must be text")
    match = _NVCC.search(text)
    if not match:
        raise ParseError("no 'Cuda compilation tools, release X.Y' line")
    return match["release"], match["version"]


# --------------------------------------------------------------------------- toolkit version files

_VERSION = lazy_re(r"\d+\.\d+(?:\.\d+)*")
_VERSION_TXT = lazy_re(r"^\s*CUDA Version\s+(?P<version>\d+\.\d+(?:\.\d+)*)\s*$", re.MULTILINE)


def parse_cuda_version_json(text: str) -> str:
    """``version.json`` of a CUDA 11.1+ toolkit: ``{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, ...}``."""
    if not isinstance(text, str):
        raise ParseError("version.json must be text")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"version.json is not JSON: {exc}") from exc
    cuda = data.get("cuda") if isinstance(data, dict) else None
    version = cuda.get("version") if isinstance(cuda, dict) else None
    if not isinstance(version, str) or not _VERSION.fullmatch(version.strip()):
        raise ParseError("version.json has no cuda.version like 12.4.1")
    return version.strip()


def parse_cuda_version_txt(text: str) -> str:
    """``version.txt`` of a CUDA 11.0 or older toolkit: ``CUDA Version 10.2.89``."""
    if not isinstance(text, str):
        raise ParseError("version.txt must be text")
    match = _VERSION_TXT.search(text)
    if not match:
        raise ParseError("no 'CUDA Version X.Y.Z' line")
    return match["version"]


_CUDA_DIR = lazy_re(r"^cuda[-_]?(?P<version>\d+(?:\.\d+)?)$")


def cuda_version_in_path(path: str) -> str | None:
    """The CUDA version a directory names: ``/usr/local/cuda-12.4/lib64`` -> "12.4", ``.../cuda-12/...`` ->
    "12"; None when no path component is ``cuda-X[.Y]``."""
    for part in path.split("/"):
        match = _CUDA_DIR.match(part)
        if match:
            return match["version"]
    return None


# --------------------------------------------------------------------------- ld.so.conf


def parse_ld_so_conf(text: str) -> tuple[str, ...]:
    """The directories an ld.so.conf file lists (``include`` and ``hwcap`` lines and comments left out)."""
    if not isinstance(text, str):
        raise ParseError("ld.so.conf must be text")
    dirs = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("/"):
            dirs.extend(d for d in re.split(r"[\s:,]+", line) if d.startswith("/"))
    return tuple(dirs)


# `head /etc/ld.so.conf.d/*` heads each file with "==> /etc/ld.so.conf.d/cuda.conf <=="; `grep -r . /etc/ld.so.conf.d`
# (and `grep -H`) prefixes each line with its file
_CONF_HEAD = lazy_re(r"^==> (?P<file>/\S{1,300}) <==$")
_CONF_GREP = lazy_re(r"^(?P<file>/etc/ld\.so\.conf(?:\.d/[^\s:]{1,200})?):(?:\d{1,6}:)?(?P<line>.*)$")
MAX_CONF_LINES = 5000


def parse_ld_so_conf_listing(text: str, default_file: str) -> tuple[tuple[str, str], ...]:
    """(file, directory) for every directory naming CUDA in pasted loader configuration: one file's text
    (``cat /etc/ld.so.conf.d/cuda.conf``, named ``default_file``), several under ``head``'s ``==> file <==`` lines, or
    ``grep -r`` lines prefixed with their file. ParseError when no line is a directory or an ``include``."""
    if not isinstance(text, str):
        raise ParseError("ld.so.conf must be text")
    current = default_file
    entries: list[tuple[str, str]] = []
    configuration = False  # a line only a loader configuration holds: a directory or an include
    for raw in text.splitlines()[:MAX_CONF_LINES]:
        line = raw.strip()[:4096]
        head = _CONF_HEAD.match(line)
        if head:
            current = head["file"]
            continue
        grep = _CONF_GREP.match(line)
        file, line = (grep["file"], grep["line"].strip()) if grep else (current, line)
        line = line.split("#", 1)[0].strip()
        if line.startswith(("include ", "hwcap ")):
            configuration = True
        elif line.startswith("/"):
            configuration = True
            entries += [(file, d) for d in re.split(r"[\s:,]+", line) if d.startswith("/") and "cuda" in d.lower()]
    if not configuration:
        raise ParseError("no directory and no include line: not a loader configuration (ld.so.conf)")
    return tuple(dict.fromkeys(entries))


# --------------------------------------------------------------------------- ldconfig -p

MAX_LDCONFIG_LINES = 50000  # ldconfig -p of a big host: ~5000 lines
MAX_LDCONFIG_LINE = 4096
_LDCONFIG_HEADER = lazy_re(r"^\s*\d+ libs? found in cache")
# "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1". The indentation may be lost in a
# paste. The path runs to the end of the line (a directory may hold a blank: "/opt/My Libs/libcuda.so.1")
# and is stripped in code: a lazy `.*?` before `\s*$` is quadratic on a long run of blanks.
_LDCONFIG_LINE = lazy_re(r"^\s*(?P<name>\S+)\s+\((?P<flags>[^()]*)\)\s+=>\s+(?P<path>/.*)$")
_KEPT_LIBRARIES = lazy_re(r"^(?:libcuda|libnvidia-ml|libcudart)\.so(?:\.|$)")
_LIBCUDA_VERSION = lazy_re(r"libcuda\.so\.(?P<version>\d+\.\d+(?:\.\d+)?)$")


def parse_ldconfig_cache(text: str) -> tuple[LibraryEntry, ...]:
    """Every line of ``ldconfig -p`` (whole, or through ``grep``), in the cache's order. ParseError when the
    text has neither the ``N libs found in cache`` header nor one ``name (flags) => path`` line."""
    entries = []
    seen = False
    for line in text_lines(text, "ldconfig output", max_lines=MAX_LDCONFIG_LINES, max_line=MAX_LDCONFIG_LINE):
        match = _LDCONFIG_LINE.match(line)
        if match:
            entries.append(LibraryEntry(match["name"], match["flags"].strip(), match["path"].rstrip()))
        seen = seen or match is not None or _LDCONFIG_HEADER.match(line) is not None
    if not seen:
        raise ParseError("no 'N libs found in cache' header and no 'name (flags) => path' line")
    return tuple(entries)


def kept_libraries(entries: tuple[LibraryEntry, ...]) -> tuple[LibraryEntry, ...]:
    """The entries for libcuda, libnvidia-ml and libcudart (what the snapshot keeps), in order."""
    return tuple(e for e in entries if _KEPT_LIBRARIES.match(e.name))


def parse_ldconfig(text: str) -> tuple[LibraryEntry, ...]:
    """``ldconfig -p``: the cache lines for libcuda, libnvidia-ml and libcudart, in the cache's order."""
    return kept_libraries(parse_ldconfig_cache(text))


def resolve_libcuda(entries: tuple[LibraryEntry, ...], architecture: str | None = None) -> LibraryEntry | None:
    """The ``libcuda.so.1`` a 64-bit program loads from the cache: the first for the host's architecture
    (x86-64, AArch64), else the first 64-bit one, else the first."""
    candidates = [e for e in entries if e.name == "libcuda.so.1"]
    if not candidates:
        return None
    wanted = {"x86_64": "x86-64", "aarch64": "aarch64"}.get((architecture or "").lower())
    for test in ((lambda e: wanted is not None and wanted in e.flags.lower()), (lambda e: "64" in e.flags)):
        hit = next((e for e in candidates if test(e)), None)
        if hit:
            return hit
    return candidates[0]


def libcuda_version(name: str | None) -> str | None:
    """``libcuda.so.535.161.08`` (or a path ending in it) -> "535.161.08"; None for ``libcuda.so.1``."""
    match = _LIBCUDA_VERSION.search((name or "").rsplit("/", 1)[-1])
    return match["version"] if match else None


# --------------------------------------------------------------------------- systemctl

_ACTIVE_STATES = {"active", "inactive", "failed", "activating", "deactivating", "reloading", "unknown",
                  "maintenance", "refreshing"}
_ENABLED_STATES = {"enabled", "enabled-runtime", "linked", "linked-runtime", "alias", "masked", "masked-runtime",
                   "static", "indirect", "disabled", "generated", "transient", "bad", "not-found"}


def parse_systemctl_state(text: str) -> str:
    """``systemctl is-active UNIT`` or ``is-enabled UNIT``: the state word it prints ("active", "disabled",
    ...); "not-found" for "Failed to get unit file state ... No such file or directory"."""
    if not isinstance(text, str):
        raise ParseError("systemctl output must be text")
    for raw in text.splitlines():
        line = raw.strip()
        if line in _ACTIVE_STATES or line in _ENABLED_STATES:
            return line
        if line.startswith("Failed to get unit file state") and "No such file" in line:
            return "not-found"
    raise ParseError("no systemctl unit state in the output")


# --------------------------------------------------------------------------- the PyTorch probe

# Run as ``python3 -c TORCH_PROBE_SCRIPT`` on the host; prints ONE JSON line. Written for any Python 3.6+.
# PyTorch's answer sits at the top level (the format GH605-GH609 read); JAX, CuPy and TensorFlow are under
# "frameworks" (GH610). A framework is imported only when importlib finds it, and none is started once the
# probe has run FRAMEWORK_BUDGET_S, so one slow import cannot cost the whole answer. JAX and TensorFlow are
# told not to reserve most of the GPU memory (they do by default), as a probe on a busy host must not.
# Each framework multiplies two small integer matrices on every GPU it sees: the exact answer is known, so
# any difference is a wrong result whatever precision mode (TF32, bfloat16 passes) the framework uses.
TORCH_PROBE_SCRIPT = r'''
import json, math, os, re, sys, time, warnings
START = time.monotonic()
FRAMEWORK_BUDGET_S = 40.0
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
out = {"probe": 2, "python": sys.version.split()[0], "executable": sys.executable}
def text(exc):
    return ("%s: %s" % (type(exc).__name__, exc))[:2000]
def say():
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
def probe_torch():
    try:
        import torch
    except ImportError as exc:
        out["installed"] = getattr(exc, "name", None) != "torch"
        if out["installed"]:
            out["error"] = text(exc)
        return
    except Exception as exc:
        out["installed"] = True
        out["error"] = text(exc)
        return
    out["installed"] = True
    out["version"] = str(getattr(torch, "__version__", ""))
    out["cuda"] = getattr(getattr(torch, "version", None), "cuda", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.monotonic()
        try:
            out["available"] = bool(torch.cuda.is_available())
            out["device_count"] = int(torch.cuda.device_count())
            if out["available"]:
                out["arch_list"] = [str(a) for a in torch.cuda.get_arch_list()]
                try:
                    torch.zeros(1, device="cuda:0")
                    torch.cuda.synchronize(0)
                finally:
                    out["first_cuda_call_s"] = round(time.monotonic() - start, 3)
                torch.backends.cuda.matmul.allow_tf32 = False
                gen = torch.Generator().manual_seed(0)
                a = torch.randn(256, 256, generator=gen)
                b = torch.randn(256, 256, generator=gen)
                ref = a @ b
                devices = []
                for i in range(out["device_count"]):
                    dev = {"index": i}
                    try:
                        dev["name"] = str(torch.cuda.get_device_name(i))
                        cap = torch.cuda.get_device_capability(i)
                        dev["capability"] = "%d.%d" % (cap[0], cap[1])
                        where = "cuda:%d" % i
                        got = (a.to(where) @ b.to(where)).cpu()
                        dev["matmul_nonfinite"] = not bool(torch.isfinite(got).all().item())
                        err = float((got - ref).abs().max().item())
                        dev["matmul_max_error"] = err if math.isfinite(err) else None
                    except Exception as exc:
                        dev["error"] = text(exc)
                    devices.append(dev)
                out["devices"] = devices
            else:
                out["first_cuda_call_s"] = round(time.monotonic() - start, 3)
        except Exception as exc:
            out["error"] = text(exc)
        out["warnings"] = [str(w.message)[:2000] for w in caught][:5]
try:
    probe_torch()
except Exception as exc:
    out["installed"] = True
    out["error"] = text(exc)

N = 16
A = [[(i * 7 + j * 3) % 9 - 4 for j in range(N)] for i in range(N)]
B = [[(i * 5 + j * 11) % 9 - 4 for j in range(N)] for i in range(N)]
REF = [float(sum(A[i][k] * B[k][j] for k in range(N))) for i in range(N) for j in range(N)]
NOTE = re.compile(r"cuda|cudnn|gpu|dlopen|cuinit|driver|device|plugin|backend", re.I)
MAX_GPUS = 16
def compare(got, dev):
    flat = [float(x) for row in got for x in row]
    if len(flat) != len(REF):
        dev["error"] = "the result has %d elements, expected %d" % (len(flat), len(REF))
        return
    dev["matmul_nonfinite"] = not all(math.isfinite(x) for x in flat)
    errors = [abs(x - r) for x, r in zip(flat, REF) if math.isfinite(x)]
    dev["matmul_max_error"] = max(errors) if errors else None
def find(name):
    try:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False
def cuda_text(value):
    value = int(value)
    return "%d.%d" % (value // 1000, (value % 1000) // 10) if value > 0 else None
def probe_jax(entry):
    import jax
    import jax.numpy as jnp
    entry["version"] = str(getattr(jax, "__version__", "")) or None
    lib = None
    try:
        import jaxlib
        lib = getattr(jaxlib, "__version__", None) or getattr(getattr(jaxlib, "version", None), "__version__", None)
    except Exception:
        pass
    entry["library_version"] = str(lib) if lib else None
    plugin = next((m for m in ("13", "12", "11") if find("jax_cuda%s_plugin" % m)), None)
    tag = re.search(r"\+cuda(\d+)(?:\.cudnn(\d+))?", entry["library_version"] or "")
    entry["cuda"] = plugin or (tag.group(1) if tag else None)
    entry["cudnn"] = tag.group(2) if tag and tag.group(2) else None
    entry["cuda_build"] = entry["cuda"] is not None
    entry["backend"] = str(jax.default_backend())
    try:
        gpus = list(jax.devices("gpu"))
    except Exception as exc:
        gpus = []
        entry["gpu_error"] = text(exc)
    entry["device_count"] = len(gpus)
    devices = []
    for i, device in enumerate(gpus[:MAX_GPUS]):
        dev = {"index": i, "name": str(getattr(device, "device_kind", "") or device)}
        try:
            a = jax.device_put(jnp.asarray(A, dtype=jnp.float32), device)
            b = jax.device_put(jnp.asarray(B, dtype=jnp.float32), device)
            compare(jnp.matmul(a, b).tolist(), dev)
        except Exception as exc:
            dev["error"] = text(exc)
        devices.append(dev)
    entry["devices"] = devices
def probe_cupy(entry):
    import cupy
    entry["version"] = str(getattr(cupy, "__version__", "")) or None
    entry["cuda_build"] = True
    runtime = cupy.cuda.runtime
    try:
        entry["cuda"] = cuda_text(runtime.runtimeGetVersion())
    except Exception as exc:
        entry["gpu_error"] = text(exc)
    try:
        entry["driver_cuda"] = cuda_text(runtime.driverGetVersion())
    except Exception:
        pass
    try:
        count = int(runtime.getDeviceCount())
    except Exception as exc:
        count = 0
        entry["gpu_error"] = text(exc)
    entry["device_count"] = count
    devices = []
    for i in range(min(count, MAX_GPUS)):
        dev = {"index": i}
        try:
            name = runtime.getDeviceProperties(i).get("name")
            dev["name"] = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
            with cupy.cuda.Device(i):
                a = cupy.asarray(A, dtype=cupy.float32)
                b = cupy.asarray(B, dtype=cupy.float32)
                compare(cupy.matmul(a, b).tolist(), dev)
        except Exception as exc:
            dev["error"] = text(exc)
        devices.append(dev)
    entry["devices"] = devices
def probe_tensorflow(entry):
    import tensorflow as tf
    entry["version"] = str(getattr(tf, "__version__", "")) or None
    try:
        info = dict(tf.sysconfig.get_build_info())
    except Exception:
        info = {}
    entry["cuda"] = str(info["cuda_version"]) if info.get("cuda_version") else None
    entry["cudnn"] = str(info["cudnn_version"]) if info.get("cudnn_version") else None
    build = info.get("is_cuda_build")
    if build is None:
        try:
            build = tf.test.is_built_with_cuda()
        except Exception:
            build = None
    entry["cuda_build"] = None if build is None else bool(build)
    try:
        gpus = list(tf.config.list_physical_devices("GPU"))
    except Exception as exc:
        gpus = []
        entry["gpu_error"] = text(exc)
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except Exception:
            pass
    entry["device_count"] = len(gpus)
    devices = []
    for i, gpu in enumerate(gpus[:MAX_GPUS]):
        dev = {"index": i}
        try:
            dev["name"] = str(tf.config.experimental.get_device_details(gpu).get("device_name") or "") or None
        except Exception:
            pass
        try:
            with tf.device("/GPU:%d" % i):
                got = tf.linalg.matmul(tf.constant(A, dtype=tf.float32), tf.constant(B, dtype=tf.float32))
            compare(got.numpy().tolist(), dev)
        except Exception as exc:
            dev["error"] = text(exc)
        devices.append(dev)
    entry["devices"] = devices
class Keep(object):
    def __init__(self):
        self.lines = []
    def add(self, line):
        line = str(line).strip()
        if line and NOTE.search(line) and line[:300] not in self.lines:
            self.lines.append(line[:300])
def framework(name, probe):
    if not find(name):
        return {"installed": False}
    spent = time.monotonic() - START
    if spent > FRAMEWORK_BUDGET_S:
        return {"installed": True, "skipped": "not probed: the probe had already run %.0f s" % spent}
    entry = {"installed": True}
    keep = Keep()
    handler = None
    saved = None
    capture = None
    try:
        import logging
        class Handler(logging.Handler):
            def emit(self, record):
                try:
                    keep.add(record.getMessage())
                except Exception:
                    pass
        handler = Handler(logging.WARNING)
        logging.getLogger().addHandler(handler)
    except Exception:
        handler = None
    try:
        import tempfile
        capture = tempfile.TemporaryFile()
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
    except Exception:
        saved = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                probe(entry)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                entry["error"] = text(exc)
            for w in caught:
                keep.add(w.message)
    finally:
        if saved is not None:
            try:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                capture.seek(0, 2)
                size = capture.tell()
                capture.seek(max(0, size - 65536))
                for line in capture.read().decode("utf-8", "replace").splitlines():
                    keep.add(line)
            except Exception:
                pass
        if handler is not None:
            try:
                import logging
                logging.getLogger().removeHandler(handler)
            except Exception:
                pass
    entry["messages"] = keep.lines[-6:]
    entry["seconds"] = round(time.monotonic() - START - spent, 3)
    return entry
out["frameworks"] = {}
for name, probe in (("jax", probe_jax), ("cupy", probe_cupy), ("tensorflow", probe_tensorflow)):
    try:
        out["frameworks"][name] = framework(name, probe)
    except Exception as exc:
        out["frameworks"][name] = {"installed": True, "error": text(exc)}
say()
'''


def _typed(data: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ParseError(f"torch probe: {key} is a boolean, expected a number")
    if not isinstance(value, kind):
        raise ParseError(f"torch probe: {key} has the wrong type ({type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParseError(f"torch probe: {key} is not a finite number")
    return value


def _strings(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError(f"torch probe: {key} is not a list of strings")
    return tuple(value)


def _device(data: Any) -> TorchDevice:
    if not isinstance(data, dict):
        raise ParseError("torch probe: a device is not an object")
    index = _typed(data, "index", int)
    if index is None:
        raise ParseError("torch probe: a device has no index")
    error = _typed(data, "matmul_max_error", (int, float))
    return TorchDevice(
        index=index, name=_typed(data, "name", str), capability=_typed(data, "capability", str),
        matmul_max_error=float(error) if error is not None else None,
        matmul_nonfinite=_typed(data, "matmul_nonfinite", bool), error=_typed(data, "error", str),
    )


def parse_torch_probe(text: str) -> TorchEnv:
    """The JSON line ``TORCH_PROBE_SCRIPT`` prints (the last line that is a JSON object with "installed")."""
    if not isinstance(text, str):
        raise ParseError("torch probe output must be text")
    data = None
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            candidate = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(candidate, dict) and "installed" in candidate:
            data = candidate
            break
    if data is None:
        raise ParseError("no JSON line with 'installed' from the torch probe")
    installed = _typed(data, "installed", bool)
    if installed is None:
        raise ParseError("torch probe: 'installed' is not true or false")
    raw_devices = data.get("devices")
    raw_devices = [] if raw_devices is None else raw_devices
    if not isinstance(raw_devices, list):
        raise ParseError("torch probe: devices is not a list")
    devices = tuple(_device(d) for d in raw_devices)
    warnings = _strings(data, "warnings")
    init = next((w for w in warnings if "CUDA initialization" in w), None)
    seconds = _typed(data, "first_cuda_call_s", (int, float))
    return TorchEnv(
        torch_version=_typed(data, "version", str) or None,
        torch_cuda_version=_typed(data, "cuda", str),
        cuda_available=_typed(data, "available", bool),
        gpu_names=tuple(d.name for d in devices if d.name),
        python_version=_typed(data, "python", str),
        installed=installed,
        python_executable=_typed(data, "executable", str),
        device_count=_typed(data, "device_count", int),
        arch_list=_strings(data, "arch_list"),
        devices=devices,
        first_cuda_call_s=float(seconds) if seconds is not None else None,
        error=_typed(data, "error", str),
        init_warning=init,
        frameworks=_frameworks(data.get("frameworks")),
    )


FRAMEWORKS = ("jax", "cupy", "tensorflow")


def _frameworks(data: Any) -> tuple[FrameworkEnv, ...]:
    """The probe's "frameworks" object: {"jax": {...}, "cupy": {...}, "tensorflow": {...}}; () when absent
    (an older probe's answer)."""
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise ParseError("torch probe: frameworks is not an object")
    found = []
    for name in FRAMEWORKS:
        entry = data.get(name)
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise ParseError(f"torch probe: frameworks.{name} is not an object")
        installed = _typed(entry, "installed", bool)
        if installed is None:
            raise ParseError(f"torch probe: frameworks.{name} has no 'installed'")
        raw_devices = entry.get("devices")
        raw_devices = [] if raw_devices is None else raw_devices
        if not isinstance(raw_devices, list):
            raise ParseError(f"torch probe: frameworks.{name}.devices is not a list")
        found.append(FrameworkEnv(
            name=name, installed=installed, version=_typed(entry, "version", str),
            library_version=_typed(entry, "library_version", str), cuda_version=_typed(entry, "cuda", str),
            cudnn_version=_typed(entry, "cudnn", str), cuda_build=_typed(entry, "cuda_build", bool),
            driver_cuda_version=_typed(entry, "driver_cuda", str), backend=_typed(entry, "backend", str),
            device_count=_typed(entry, "device_count", int), devices=tuple(_framework_device(d) for d in raw_devices),
            gpu_error=_typed(entry, "gpu_error", str), error=_typed(entry, "error", str),
            messages=_strings(entry, "messages"), skipped=_typed(entry, "skipped", str),
        ))
    return tuple(found)


def _framework_device(data: Any) -> FrameworkDevice:
    if not isinstance(data, dict):
        raise ParseError("torch probe: a framework's device is not an object")
    index = _typed(data, "index", int)
    if index is None:
        raise ParseError("torch probe: a framework's device has no index")
    error = _typed(data, "matmul_max_error", (int, float))
    return FrameworkDevice(index=index, name=_typed(data, "name", str),
                           matmul_max_error=float(error) if error is not None else None,
                           matmul_nonfinite=_typed(data, "matmul_nonfinite", bool), error=_typed(data, "error", str))
