"""GH6xx: after the install: CUDA toolkits versus the driver, the loader's libraries, persistence, and
whether PyTorch can actually use the GPUs.

The toolkit/driver rules follow NVIDIA's CUDA release notes and CUDA Compatibility guide
(``knowledge/cuda_drivers.csv``); the reasons
``torch.cuda.is_available()`` returns False follow the tools' own messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from gpuhealth.checks.driver import REBOOT, driver_version_of, module_loaded, user_space_version
from gpuhealth.checks.registry import Draft, Expectations, Skip, check, fixes_for, table_fixes
from gpuhealth.commands import fix as slotted
from gpuhealth.knowledge.cuda_drivers import family_minimum, minor_releases, requirement, version_key
from gpuhealth.knowledge.signatures import signature
from gpuhealth.lazyre import guarded_re, has_folded, lazy_re
from gpuhealth.model import (
    REPORTED_WORDS,
    CudaState,
    DeviceRequest,
    Evidence,
    Fix,
    FrameworkEnv,
    Gpu,
    LateVisibility,
    MessageLine,
    Severity,
    Snapshot,
    TorchEnv,
)
from gpuhealth.records import record

PROC_VERSION = "/proc/driver/nvidia/version"
TORCH_SOURCE = "python3 -c <gpuhealth torch probe>"
MATMUL_TOLERANCE = 1e-2  # float32 256x256 of N(0,1) entries, TF32 off: GPU and CPU differ by ~1e-4
SLOW_FIRST_CALL_S = 30.0
# Errors of the probe's matmul that say nothing about the GPU computing wrongly (GH607 ignores them).
NOT_THE_GPU = ("no kernel image", "busy or unavailable", "out of memory")
_DATACENTER = lazy_re(r"\b(?:Tesla|GH\d{3}|GB\d{3}|[ABHLTVPK]\d{1,3}[A-Z]?)\b")
_NOT_DATACENTER = guarded_re(r"GeForce|RTX|Quadro|TITAN", re.IGNORECASE,
                             may=has_folded("geforce", "rtx", "quadro", "titan"))
_CUDA_DIR = lazy_re(r"^cuda[-_]?(\d+(?:\.\d+)?)$")
ENABLE_PERSISTENCED = "sudo systemctl enable --now nvidia-persistenced"
NO_PERSISTENCE = "--no-persistence-mode"  # nvidia-persistenced(1): forces persistence mode off on every GPU
# GH604's rows of knowledge/fixes.csv for a daemon started with NO_PERSISTENCE: the look that shows it, then the fix
FORCED_OFF_FIXES = ("systemctl status nvidia-persistenced", "sudo systemctl edit --full nvidia-persistenced",
                    "sudo systemctl restart nvidia-persistenced")

# PyTorch's own install commands reinstall torch with its companions from the same index ("pip3 install torch
# torchvision torchaudio --index-url https://download.pytorch.org/whl/cu128", PyTorch "Start Locally"
# <https://pytorch.org/get-started/locally/>; each release's set: "Previous PyTorch Versions"
# <https://pytorch.org/get-started/previous-versions/>). torch alone leaves torchvision/torchaudio '+cpu' beside it.
TORCH_REINSTALL = ("pip install --force-reinstall torch torchvision torchaudio"
                   " --index-url https://download.pytorch.org/whl/cu<XY>")


# --------------------------------------------------------------------------- shared judgements


def _cuda(snapshot: Snapshot) -> CudaState:
    assert snapshot.cuda is not None  # guaranteed by requires=("cuda",)
    return snapshot.cuda


def _torch(snapshot: Snapshot) -> TorchEnv:
    assert snapshot.torch is not None  # guaranteed by requires=("torch",)
    return snapshot.torch


def driver_version(snapshot: Snapshot) -> tuple[str | None, str]:
    """The driver version (the kernel module's when known) and where it came from."""
    if snapshot.driver is not None and snapshot.driver.version:
        return snapshot.driver.version, REPORTED_WORDS if snapshot.reported_fact("driver", "version") else PROC_VERSION
    version, source = user_space_version(snapshot)
    if version:
        return version, source
    if snapshot.torch is not None and snapshot.torch.driver_version:
        return snapshot.torch.driver_version, "PyTorch collect_env"
    return None, ""


def _driver_max_cuda(snapshot: Snapshot) -> str | None:
    for gpu in snapshot.gpus:
        if gpu.cuda_version:
            return gpu.cuda_version
    if snapshot.smi is not None and snapshot.smi.cuda_version:
        return snapshot.smi.cuda_version
    if snapshot.nvml is not None and snapshot.nvml.cuda_driver_version:
        return snapshot.nvml.cuda_driver_version
    return None


def gpu_count(snapshot: Snapshot) -> int:
    """GPUs the driver reports, else NVIDIA GPUs on the PCI bus."""
    return snapshot.gpu_count


def _gpus_exist(snapshot: Snapshot) -> bool:
    return bool(gpu_count(snapshot)) or bool(snapshot.torch and snapshot.torch.driver_version)


def hidden_by(name: str, value: str, count: int, uuids: tuple[str, ...]) -> str | None:
    """Why ``CUDA_VISIBLE_DEVICES``/``NVIDIA_VISIBLE_DEVICES`` = ``value`` hides GPUs it should not, or None.

    CUDA reads the list up to the first entry that is not a GPU (an index out of range, an unknown
    UUID, a word): that entry and all after it are dropped. A valid subset is a choice, not a fault.
    ``count`` 0: the GPU count is unknown (pasted evidence), so an index is not judged; a value that hides
    every GPU whatever the count (empty, ``-1``, ``none``) still is.
    """
    text = value.strip()
    if not text:
        return f"{name} is set but empty: no GPU is visible"
    if text.lower() in ("none", "void", "nodevfiles", "-1"):
        return f"{name}={text}: no GPU is visible"
    if name == "NVIDIA_VISIBLE_DEVICES" and text.lower() == "all":
        return None
    tokens = [t.strip() for t in text.split(",")]
    if len(tokens) > 1 and not tokens[-1]:
        tokens.pop()  # "0,1,": a trailing comma ends the list; it hides nothing after it
    for position, token in enumerate(tokens):
        rest = "" if position == 0 else " (entries before it stay visible)"
        if re.fullmatch(r"-?\d+", token):
            if count and not 0 <= int(token) < count:
                has = "1 GPU: a single GPU is device 0" if count == 1 else f"{count} GPUs: 0-{count - 1}"
                return (f"{name}={text}: index {token} is not a GPU on this host ({has}); "
                        f"it and every entry after it are ignored{rest}")
        elif token.startswith("GPU-"):
            if uuids and not any(u.startswith(token) for u in uuids):
                return f"{name}={text}: {token} matches no GPU UUID on this host; it and the rest are ignored{rest}"
        elif not token.startswith("MIG-"):
            return f"{name}={text}: '{token}' is neither a GPU index nor a UUID; it and the rest are ignored{rest}"
    return None


def counted_gpus(snapshot: Snapshot) -> int:
    """GPUs on this host as the evidence counts them: a program's list (``gpu_count``), else the number a person's
    words state ("I have only one GPU"; a reported fact, so what rests on it stays below critical); 0 when unknown."""
    return gpu_count(snapshot) or (snapshot.gpus_stated or 0)


def stated_count_evidence(snapshot: Snapshot) -> Evidence | None:
    """The reporter's sentence that gave the GPU count, where no program's output counts the GPUs."""
    fact = snapshot.reported_fact("gpus_stated")
    if gpu_count(snapshot) or not snapshot.gpus_stated or fact is None:
        return None
    return Evidence(REPORTED_WORDS, (fact.words,))


def _visibility_problems(snapshot: Snapshot) -> list[tuple[str, str]]:
    count = counted_gpus(snapshot)
    uuids = tuple(g.uuid for g in snapshot.gpus if g.uuid)
    problems = []
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        if name in snapshot.env:
            why = hidden_by(name, snapshot.env[name], count, uuids)
            if why:
                problems.append((name, why))
    return problems


def is_datacenter(name: str | None) -> bool:
    return bool(name) and not _NOT_DATACENTER.search(name or "") and bool(_DATACENTER.search(name or ""))


def _arch_number(arch: str) -> tuple[str, int, int] | None:
    """``sm_86`` -> ("sm", 8, 6); ``compute_90`` -> ("compute", 9, 0); ``sm_120`` -> ("sm", 12, 0)."""
    match = re.fullmatch(r"(sm|compute)_(\d+)[a-z]?", arch.strip())
    if not match or len(match[2]) < 2:
        return None
    return match[1], int(match[2][:-1]), int(match[2][-1])


def arch_support(capability: str, arch_list: tuple[str, ...]) -> str | None:
    """How a wheel built for ``arch_list`` runs on a GPU of ``capability`` ("9.0"): "native" (a cubin of
    the same major and a minor not above it), "ptx" (only by JIT-compiling PTX for an older or equal
    architecture: slow first call), or None (no kernel image: every CUDA op fails)."""
    key = version_key(capability)
    if len(key) < 2:
        return "native"  # unknown capability: nothing to judge
    major, minor = key[0], key[1]
    parsed = [p for p in (_arch_number(a) for a in arch_list) if p]
    if any(kind == "sm" and m == major and n <= minor for kind, m, n in parsed):
        return "native"
    if any(kind == "compute" and (m, n) <= (major, minor) for kind, m, n in parsed):
        return "ptx"
    return None


def _cuda_dir_version(path: str, state: CudaState) -> str | None:
    """The CUDA version a library directory belongs to: its ``cuda-X.Y`` component, or for
    ``/usr/local/cuda/...`` the toolkit that link points at."""
    for part in path.split("/"):
        match = _CUDA_DIR.match(part)
        if match:
            return match[1]
    if path.startswith("/usr/local/cuda/") or path == "/usr/local/cuda":
        target = state.default_link or ""
        for part in target.split("/"):
            match = _CUDA_DIR.match(part)
            if match:
                return match[1]
    return None


def _conda_cuda(state: CudaState) -> str | None:
    """The major.minor of the conda environment's cudatoolkit (``11.3.1`` -> ``11.3``), or None."""
    match = re.match(r"(\d+\.\d+)", state.conda_cudatoolkit or "")
    return match[1] if match else None


def _toolkit_version(state: CudaState) -> str | None:
    """The version of the toolkit /usr/local/cuda points at."""
    for toolkit in state.toolkits:
        if state.default_link and toolkit.path == state.default_link.rstrip("/"):
            return toolkit.version
    return None


def module_version(snapshot: Snapshot) -> str | None:
    """The loaded kernel module's version: /proc/driver/nvidia/version, else the driver version NVML or nvidia-smi
    report (nvmlSystemGetDriverVersion is the kernel driver's; when NVML answers, its library matches the module)."""
    if snapshot.driver and snapshot.driver.version:
        return snapshot.driver.version
    if snapshot.nvml is not None and snapshot.nvml.ok and snapshot.nvml.driver_version:
        return snapshot.nvml.driver_version
    return snapshot.smi.driver_version if snapshot.smi else None


def stale_libcuda_of(snapshot: Snapshot) -> str | None:
    """The kernel module version when the loader's libcuda is a stale one (GH603), else None."""
    state = snapshot.cuda
    kernel = module_version(snapshot)
    if state is None or not state.libcuda_path or not state.libcuda_version or not kernel:
        return None  # a libcuda.so.1 that is not a link (containers) or no module loaded: nothing to compare
    if state.libcuda_version == kernel:
        return None
    user, _ = user_space_version(snapshot)
    if user == state.libcuda_version:
        return None  # the whole user space differs from the module: GH202
    compat = "/compat/" in state.libcuda_path or "/compat/" in (state.libcuda_target or "")
    if compat and version_key(state.libcuda_version) > version_key(kernel):
        return None
    return kernel


# --------------------------------------------------------------------------- GH601


@check("GH601", "cuda-toolkit-driver-mismatch", "A CUDA toolkit is newer than the driver supports",
       reads=("cuda", "torch"))
def cuda_toolkit_driver_mismatch(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The CUDA toolkit on this host (`nvcc --version` on PATH, and the toolkit `/usr/local/cuda` points
    at, read from its `version.json` or `version.txt`) against the driver version, using NVIDIA's
    table of the driver bundled with each toolkit and the minor-version-compatibility minimums
    (`src/gpuhealth/knowledge/cuda_drivers.csv`, from NVIDIA's CUDA release notes and CUDA Compatibility
    guide); also a conda environment's
    `cudatoolkit` from a pasted `conda list`, and the CUDA runtime PyTorch was built with
    (`torch.version.cuda`, collect_env's "CUDA used to build PyTorch", a `+cu121` wheel). The driver's
    version comes from any nvidia-smi output, a whole `nvidia-smi -q` or a piece of it
    (`nvidia-smi -q | grep -i version`), or the table's header line alone. Critical when the driver is
    below the toolkit family's minimum (12.x needs >= 525, 13.x >= 580, 11.x >= 450; before 11 the
    toolkit's own bundled driver); info when the driver is older than the toolkit's bundled driver but
    meets the family minimum.

    Why it matters:
    Programs built with a toolkit newer than the driver supports fail at start with "CUDA driver
    version is insufficient for CUDA runtime version". Within a major family (CUDA 11+) they run
    through minor version compatibility, but features that need the newer driver (JIT-compiling PTX
    from the newer toolkit) fail. The "CUDA Version" nvidia-smi prints is the newest CUDA the driver
    supports, not the toolkit that is installed: the two are often confused.

    How to fix:
    First compare the newest CUDA the driver supports (`nvidia-smi | grep 'CUDA Version'`) with the CUDA
    the program was built for (`nvcc --version`; for PyTorch
    `python -c 'import torch; print(torch.version.cuda)'`). Then either upgrade the driver to at least the
    toolkit's bundled branch (`cuda-drivers-<branch>` from
    NVIDIA's repository; reboot), or install the toolkit the driver supports
    (`cuda-toolkit-<major>-<minor>` for the CUDA Version nvidia-smi prints) and point `/usr/local/cuda`
    and PATH at it. PyTorch, JAX and conda environments bring their own CUDA runtime and only need
    the driver to be new enough for that: for PyTorch, install a wheel built for a CUDA the driver
    supports, or upgrade the driver.

    Exceptions:
    A toolkit used only to compile for other machines. Forward compatibility (`cuda-compat`) lets
    data-center GPUs run a newer CUDA on an older driver; GH603 reports that libcuda. On a GeForce or TITAN it cannot
    (NVIDIA's CUDA Compatibility guide): where the program's CUDA comes with a compat libcuda newer than the driver
    (on the loader path, or in an NVIDIA CUDA image, whose cuda-compat the NVIDIA Container Toolkit enables whenever
    it is newer than the host's driver: NVIDIA/nvidia-container-toolkit#1426), CUDA fails with error 803 or 804, so
    a CUDA newer than the driver's bundled one is critical even within its major family, the driver upgrade comes
    first among the fixes, and the finding explains GH603's. A container run from an NVIDIA CUDA image
    (`docker run ... nvidia/cuda:12.9.0-base-...`) counts as that image's CUDA, like a Dockerfile's FROM.
    A program's CUDA error 804 ("forward compatibility was attempted on non supported HW") is this check's line: forward
    compatibility is reached for when the driver is older than the program's CUDA (an NVIDIA image's entrypoint, the
    toolkit's compat hook), and the GPU does not support it, so a driver new enough for that CUDA is the fix (or an
    image built for the CUDA the driver supports), unless the evidence shows a compat directory put on the host's
    loader path by hand (LD_LIBRARY_PATH, ld.so.conf, `ldconfig -p`, `ldd`, a cuda-compat-X-Y package), or names a
    GeForce or TITAN with no container in the evidence (only a compat copy on the host's loader path is loaded there):
    then GH603's removal leads. Inside a container (an NVIDIA image's banner or entrypoint, `docker run --gpus`, a
    container-toolkit line) the 804 stays this check's, whatever the GPU. An NGC container's start-up check ("This
    container was built for NVIDIA Driver Release X or later, but version Y was detected and compatibility mode is
    UNAVAILABLE") is the same finding: X is read as the container's
    CUDA (the release that driver is bundled with) and Y as the host's driver, so it names the driver branch to
    install; its "CUDA Minor Version Compatibility mode ENABLED" is information, and "CUDA Forward Compatibility mode
    ENABLED" is not a fault. A program's own message naming the CUDA it uses against the driver (CUDA.jl's "CUDA X is
    not supported by your driver (which supports up to Y)" or "You are using CUDA X with a driver that only supports up
    to Y", XLA's "older than the ptxas CUDA version (X)") counts as that program's CUDA.
    Toolkit versions the table does not list (newer than 13.3) are not judged. PyTorch brings its own CUDA runtime, so
    its CUDA is held only to the family minimum (critical), never to the toolkit's bundled driver.
    Versions stated in the reporter's words ("my CUDA version is 12.9.41 and my CUDA driver is
    570.133.20") are judged the same way where no program's output gives them; a finding that rests on
    the words alone is at most a warning, and its evidence quotes them.
    """
    state = snapshot.cuda
    torch_cuda = snapshot.torch.torch_cuda_version if snapshot.torch is not None else None
    if state is None and not torch_cuda:
        yield Skip(snapshot.unavailable.get("cuda") or "no CUDA toolkit (nvcc --version, /usr/local/cuda, conda list) "
                   "and no PyTorch CUDA version in the evidence given")
        return
    toolkits = _toolkits(snapshot, state) if state is not None else []
    if torch_cuda:
        toolkits.append(("PyTorch's CUDA", torch_cuda, Evidence(snapshot.sources.get("torch", "PyTorch"),
                                                                (f"torch.version.cuda = {torch_cuda}",))))
    yield from _toolkit_mismatch(snapshot, toolkits)


def _toolkits(snapshot: Snapshot, state: CudaState) -> list[tuple[str, str, Evidence]]:
    """(label, CUDA version, evidence) of each toolkit on the host: nvcc, /usr/local/cuda, conda's cudatoolkit."""
    toolkits: list[tuple[str, str, Evidence]] = []
    stated = snapshot.reported_fact("cuda", "nvcc_release")
    if state.nvcc_release and stated is not None:  # a person's words: "my CUDA version is 12.9"
        toolkits.append(("the CUDA the reporter names", state.nvcc_version or state.nvcc_release,
                         Evidence(REPORTED_WORDS, (stated.words,))))
    elif state.nvcc_release:
        toolkits.append(("nvcc on PATH", state.nvcc_version or state.nvcc_release, Evidence(
            "nvcc --version", (f"Cuda compilation tools, release {state.nvcc_release}"
                               + (f", V{state.nvcc_version}" if state.nvcc_version else ""),))))
    default = _toolkit_version(state)
    if default and (not state.nvcc_release or version_key(default)[:2] != version_key(state.nvcc_release)[:2]):
        source = next((t.source for t in state.toolkits if t.path == state.default_link), None) or "/usr/local/cuda"
        toolkits.append((f"/usr/local/cuda -> {state.default_link}", default,
                         Evidence(source, (f"CUDA {default}",))))
    if state.conda_cudatoolkit:
        shown = Evidence(snapshot.sources.get("cuda", "conda list"), (f"cudatoolkit {state.conda_cudatoolkit}",))
        toolkits.append(("conda cudatoolkit", state.conda_cudatoolkit, shown))
    if state.base_image_cuda:  # a container built on it, or run from it, runs that CUDA on the host's driver
        source = snapshot.sources.get("cuda", "Dockerfile")
        if state.image_command:
            toolkits.append((f"the container image {state.base_image}", state.base_image_cuda,
                             Evidence(source, (state.image_command[:200],))))
        else:
            toolkits.append((f"the base image {state.base_image}", state.base_image_cuda,
                             Evidence(source, (f"FROM {state.base_image}",))))
    if state.program_cuda and state.program_line:  # a program's own message: "CUDA 11.0.0 is not supported by ..."
        toolkits.append((f"the CUDA {state.program_name or 'the program'} uses", state.program_cuda,
                         Evidence(snapshot.sources.get("cuda", "the program's output"), (state.program_line[:200],))))
    return toolkits


def _toolkit_mismatch(snapshot: Snapshot, toolkits: list[tuple[str, str, Evidence]]) -> Iterator[Draft | Skip]:
    if not toolkits:
        return
    driver, driver_source = driver_version(snapshot)
    if not driver:
        yield Skip("the driver version is unknown: " + snapshot.unavailable.get("driver", "no driver evidence"))
        return
    # nvidia-smi's CUDA Version is that of the libcuda it loaded: not the driver's own when that is another release
    max_cuda = _driver_max_cuda(snapshot) if nvml_libcuda_release(snapshot) is None else None
    reminder = (Evidence("nvidia-smi", (f"CUDA Version: {max_cuda} is the newest CUDA driver {driver} supports, "
                                        "not the installed toolkit",)),) if max_cuda else ()
    worst: Severity | None = None
    lines: list[tuple[int, str]] = []
    evidence: list[Evidence] = []
    branches: set[str] = set()
    flagged: set[str] = set()
    blocked = _forward_compat_blocked(snapshot, driver)
    for label, version, shown in toolkits:
        family, bundled = family_minimum(version), requirement(version)
        minimum = family or bundled
        if minimum is None:
            continue
        if version_key(driver) < version_key(minimum.driver_min):
            severity = Severity.CRITICAL
            lines.append((0, f"CUDA {version} ({label}) needs driver >= {minimum.driver_min}, the driver is {driver}"))
        elif family and bundled and version_key(driver) < version_key(bundled.driver_min) and blocked:
            # minor version compatibility would run it, but the forward-compat libcuda that was tried cannot: upgrade
            severity = Severity.CRITICAL
            lines.append((0, f"CUDA {version} ({label}) is newer than driver {driver} supports (it bundles "
                             f"{bundled.driver_min}), and {blocked}: upgrade the driver"))
        elif family and bundled and version_key(driver) < version_key(bundled.driver_min) and label != "PyTorch's CUDA":
            severity = Severity.INFO
            if label.startswith(IMAGE_LABELS) and forward_compat_gpu(snapshot) != "datacenter":
                # the image's cuda-compat is enabled on an older driver: where the GPU lacks forward compatibility,
                # CUDA fails with 804 (a program's line then makes this critical)
                lines.append((1, f"CUDA {version} ({label}) bundles driver {bundled.driver_min}: on driver {driver} "
                                 "the image's cuda-compat libcuda (forward compatibility) is enabled, which only "
                                 "data-center GPUs support; elsewhere CUDA fails with error 804 until the driver is "
                                 "upgraded"))
            else:
                lines.append((1, f"CUDA {version} ({label}) bundles driver {bundled.driver_min}; driver {driver} runs "
                                 "it only through minor version compatibility (newer PTX cannot be JIT-compiled)"))
        else:
            continue
        worst = severity if worst is None or severity.rank > worst.rank else worst
        flagged.add(label)
        evidence.append(shown)
        rows = [r for r in (family, bundled) if r]
        from gpuhealth.knowledge.sources import cite  # (only for a toolkit the driver is too old for)

        evidence.append(Evidence("src/gpuhealth/knowledge/cuda_drivers.csv", tuple(
            f"CUDA {r.cuda}{' ' + r.release if r.release else '.x'}: driver >= {r.driver_min} ({cite(r.source, False)})"
            for r in rows)))
        branches.add((bundled or minimum).driver_min.split(".")[0])
    if worst is None:
        return
    major, minor = max_cuda.split(".", 1) if max_cuda and "." in max_cuda else (None, None)
    branch = max(branches, key=int)
    # the CUDA Version nvidia-smi prints: its toolkit package and directory
    toolkit_fixes = fixes_for(debian=["sudo apt-get install cuda-toolkit-{major:number}-{minor:number}",
                                      "sudo update-alternatives --set cuda /usr/local/cuda-{cuda}"],
                              rhel=["sudo dnf install cuda-toolkit-{major:number}-{minor:number}",
                                    "sudo alternatives --set cuda /usr/local/cuda-{cuda}"],
                              major=major, minor=minor, cuda=max_cuda)
    torch_fixes = (Fix(TORCH_REINSTALL,
                       "any", note=f"cu<XY> no newer than the CUDA Version nvidia-smi prints ({max_cuda or '?'})"),)
    driver_fixes = (*fixes_for(debian=["sudo apt-get install cuda-drivers-{branch}"],
                               rhel=["sudo dnf install cuda-drivers-{branch}"], disruptive=True, branch=branch),
                    REBOOT)
    images = {label for label in flagged if label.startswith(IMAGE_LABELS)}
    # an image brings its own CUDA: the other way is an image of the CUDA the driver supports, not a host toolkit
    image_fixes = (Fix("Run an image built for the CUDA Version nvidia-smi prints or an older one (an nvidia/cuda tag "
                       "of that release, or the framework's image built on it; of an NGC container, a release whose "
                       "Driver Requirements the driver meets)", "any", kind="step",
                       note=f"CUDA {max_cuda} or older" if max_cuda else "nvidia-smi prints the CUDA Version"),)
    other_fixes = (*(toolkit_fixes if flagged - {"PyTorch's CUDA"} - images else ()),
                   *(image_fixes if images else ()),
                   *(torch_fixes if "PyTorch's CUDA" in flagged else ()))
    yield Draft(
        worst, "; ".join(line for _, line in sorted(lines)),
        evidence=(*evidence, Evidence(driver_source, (f"driver {driver}",)), *reminder),
        # a GPU that cannot use forward compatibility: the driver upgrade is the fix, a CUDA it supports the other way
        fixes=(*driver_fixes, *other_fixes) if blocked else (*other_fixes, *driver_fixes),
        # the forward-compat error (GH603's line, 803/804) and the GPU that cannot use it are this finding's symptoms
        explains=COMPAT_SYMPTOMS if blocked and worst is Severity.CRITICAL else (),
    )


IMAGE_LABELS = ("the container image ", "the base image ")  # _toolkits' labels of a container's CUDA


def _forward_compat_blocked(snapshot: Snapshot, driver: str) -> str | None:
    """Why forward compatibility cannot bridge a CUDA newer than the driver here, or None: the GPU is a GeForce (the
    CUDA Compatibility guide supports it on data-center GPUs and select NGC-ready RTX parts only) and the program's
    CUDA comes with a compat libcuda newer than the driver: on the loader path, or in an NVIDIA CUDA image (its
    cuda-compat, under /usr/local/cuda/compat, which the NVIDIA Container Toolkit enables whenever it is newer than
    the host's driver, whatever the GPU: NVIDIA/nvidia-container-toolkit#1426), so CUDA fails with 803 or 804."""
    if forward_compat_gpu(snapshot) != "consumer":
        return None
    compat = forward_compat_libcuda(snapshot)
    if compat is not None and set_by_hand(compat):
        return None  # a compat directory put on the host's loader path: taking it off is GH603's finding, which leads
    state = snapshot.cuda
    if compat is not None and _compat_newer(compat, driver, _driver_max_cuda(snapshot)):
        tried = f"the compat libcuda {compat.path} on the loader path"
    elif state is not None and state.base_image and "nvidia/cuda:" in state.base_image and state.base_image_cuda:
        tried = f"the image's cuda-compat (CUDA {state.base_image_cuda})"
    else:
        return None
    return f"forward compatibility ({tried}) is not supported on {_consumer_name(snapshot)}"


def _consumer_name(snapshot: Snapshot) -> str:
    """The first GeForce or TITAN the evidence names (nvidia-smi, NVML, else lspci)."""
    names = [g.name for g in snapshot.gpus if g.name] + [d.name for d in snapshot.pci_devices or () if d.name]
    named = next((n for n in names if _CONSUMER.search(n)), None)
    if named is None:  # a GeForce the reporter's words name ("my GTX 1080 Ti")
        named = next((f"{g.named} (a GeForce, in the reporter's words)" for g in snapshot.gpus_named
                      if g.line == "geforce"), None)
    return named or "this GPU"


# --------------------------------------------------------------------------- GH602


PIP_WHEELS = "pip CUDA wheels"
_WHEEL_DIR = lazy_re(r"/(?:site|dist)-packages/nvidia/")
MAX_PATHS = 6


@check("GH602", "multiple-cuda-on-library-path", "Several CUDA versions on the library path",
       requires=("cuda",), reads=("messages",))
def multiple_cuda_on_library_path(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `LD_LIBRARY_PATH` and the loader's configuration (`/etc/ld.so.conf`, `/etc/ld.so.conf.d/*.conf`)
    name directories of more than one CUDA version (`/usr/local/cuda-11.8/lib64` and
    `/usr/local/cuda-12.4/lib64`; `/usr/local/cuda` counts as the version it points at; `cuda-12` and
    `cuda-12.4` count as one). Library files a program's output shows it using count too (`ldd`, a loader
    error, a library-discovery file naming `/usr/local/cuda-8.0/.../libcublas.so` next to
    `/usr/local/cuda-10.1/lib64/libcufft.so`); a pip CUDA wheel's directory (`site-packages/nvidia/<lib>/lib`)
    is a copy of its own. With a loader error in the same evidence ("undefined symbol ..., version
    libnvJitLink.so.12") the finding is critical: the wrong copy was loaded.

    Why it matters:
    Libraries of one major version share a soname (`libcublas.so.12`, `libcudart.so.12`): whichever
    directory comes first wins, so a program built against 12.4 can load 12.1's libraries and fail
    with "undefined symbol" or subtle version errors; builds link against whichever `libcudart.so` the
    path finds first. Which one wins changes with the order of the path, so the failure is
    intermittent across shells, services and containers.

    How to fix:
    Keep one toolkit on the path: set `LD_LIBRARY_PATH` to `/usr/local/cuda/lib64` (or nothing) in
    shell profiles and service units, point `/usr/local/cuda` at the wanted toolkit with
    alternatives, delete or edit the stale `/etc/ld.so.conf.d/*cuda*.conf` file, and run
    `sudo ldconfig`.

    Exceptions:
    Different major versions (11 and 12) have different sonames and can coexist for programs that
    need both; still, build systems may pick the wrong one. Conda and pip environments bring their own
    CUDA libraries in directories without a version in the name; they are counted only when `conda list`
    shows the environment's `cudatoolkit` and a system toolkit of another version is on LD_LIBRARY_PATH
    (which the loader searches first). A pasted `ldconfig -p` counts as the loader's configuration.
    """
    state = _cuda(snapshot)
    named: dict[str, list[str]] = {}
    for path in state.ld_library_path:
        version = _cuda_dir_version(path, state)
        if version:
            named.setdefault(version, []).append(f"LD_LIBRARY_PATH: {path}")
    for entry in state.ld_so_conf:
        version = _cuda_dir_version(entry.directory, state)
        if version:
            named.setdefault(version, []).append(f"{entry.file}: {entry.directory}")
    for path in state.library_files:  # the copies a program's output shows it using (ldd, loader errors)
        version = _cuda_dir_version(path, state) or (PIP_WHEELS if _WHEEL_DIR.search(path) else None)
        if version:
            named.setdefault(version, []).append(f"used: {path}")
    conda = _conda_cuda(state)
    if conda and named and conda not in named and not any(v.startswith(conda + ".") for v in named):
        # a system toolkit on LD_LIBRARY_PATH is searched before the conda environment's own libraries
        named.setdefault(conda, []).append(f"conda environment: cudatoolkit {state.conda_cudatoolkit}")
    distinct = [v for v in named if not any(w != v and w.startswith(v + ".") for w in named)]
    if len(distinct) < 2:
        if snapshot.origin == "evidence" and not (state.ld_library_path or state.ld_so_conf):
            # only a program's library files were given: the search path that could hold another copy was not
            yield Skip("LD_LIBRARY_PATH and ldconfig -p: not in the evidence given")
        return
    for version in list(named):
        if version not in distinct:  # cuda-12 next to cuda-12.4: the same toolkit
            wider = next(w for w in distinct if w.startswith(version + "."))
            named[wider] += named.pop(version)
    distinct.sort(key=version_key)
    stale = sorted({e.file for e in state.ld_so_conf if _cuda_dir_version(e.directory, state) != distinct[-1]
                    and _cuda_dir_version(e.directory, state) in named and e.file.startswith("/")})
    evidence = tuple(Evidence(v if v == PIP_WHEELS else f"CUDA {v}", tuple(named[v][:MAX_PATHS])) for v in distinct)
    # a loader error beside them (undefined symbol, version not found) shows the wrong copy was loaded
    failed = [m for m in snapshot.messages or () if m.symptom == "cuda-library-missing" and m.signature
              and signature(m.signature).severity != "info"]
    yield Draft(
        Severity.CRITICAL if failed else Severity.WARNING,
        f"{_copies(distinct)} are all on the library path: whichever comes first wins"
        + (", and a library failed to load" if failed else ""),
        evidence=evidence + tuple(Evidence(m.source, (m.line[:300],)) for m in failed[:2]),
        explains=("GH612",) if failed else (),
        # the stale ld.so.conf.d files found, then the table's procedure (look, keep one CUDA, ldconfig)
        fixes=(*(slotted("sudo rm {conf_file:path}", note="if that toolkit should not be used", conf_file=f)
                 for f in stale),
               *fixes_for(debian=["sudo update-alternatives --config cuda"], rhel=["sudo alternatives --config cuda"]),
               *table_fixes("GH602")),
    )


def _copies(versions: list[str]) -> str:
    """``["11.8", "12.4"]`` -> ``CUDA 11.8, 12.4``; the pip wheels' copy is named as such."""
    numbered = [v for v in versions if v != PIP_WHEELS]
    text = f"CUDA {', '.join(numbered)}" if numbered else ""
    return f"{text} and {PIP_WHEELS}" if PIP_WHEELS in versions and text else text or PIP_WHEELS


# --------------------------------------------------------------------------- GH603


@check("GH603", "stale-libcuda", "The loader's libcuda is not the loaded driver's version",
       reads=("cuda", "messages"))
def stale_libcuda(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The `libcuda.so.1` the dynamic loader resolves (`ldconfig -p`, then where that link points:
    `libcuda.so.535.161.08`) is a different version from the loaded kernel module
    (`/proc/driver/nvidia/version`, or the driver version NVML and nvidia-smi report), while the rest of user
    space matches the module (otherwise GH202 reports the driver/library mismatch).

    A forward-compatibility libcuda (the cuda-compat package's, under `/usr/local/cuda-X.Y/compat`, an image's
    `/usr/local/cuda/compat`, a conda `cuda-compat` directory) that the loader takes first is judged by NVIDIA's CUDA
    Compatibility guide (Forward Compatibility): it is found on `LD_LIBRARY_PATH` (a live process's, `echo
    $LD_LIBRARY_PATH`, an `export` or `env` line, a Dockerfile's `ENV`), as the `libcuda.so.1` that `ldconfig -p`
    resolves, in an ld.so.conf directory, or in `ldd` output; beside a CUDA error 803 or 804, the `cuda-compat-X-Y`
    package a listing (or the reporter's words: "I installed cuda-compat-12.9") shows installed, whose libcuda under
    `/usr/local/cuda-X.Y/compat` those errors say CUDA took. Its CUDA release comes from the directory
    (`cuda-12.9` -> 12.9) and its version from the file (`libcuda.so.575.51.03`) or that release's bundled driver.
    - No newer than the kernel driver (nvidia-smi's CUDA Version already covers its release): the guide says it must
      not be used; critical, with the exact path and how to take it off `LD_LIBRARY_PATH` or out of ld.so.conf.d.
    - Newer than the driver on a GeForce or TITAN (forward compatibility is for data-center GPUs and select NGC-ready
      RTX parts only): warning, critical beside a CUDA error 803 or 804. Within the driver's major family (a 12.9
      compat on a 570 driver) the first fix is removing the compat libcuda, since minor version compatibility runs
      the program without it; across families, a driver that supports the CUDA the program needs (GH601 leads where
      the evidence names the program's CUDA).
    - Newer than the driver on data-center GPUs: the intended use, not reported; beside an 803 or 804 it is
      critical, with the guide's rule (the cuda-compat package of the CUDA the program needs, on a driver branch the
      guide lists for it; a kernel driver upgraded within its branch may need a newer cuda-compat).
    - The GPU's class comes from its name (nvidia-smi, NVML, else lspci), else from the product line of the models the
      reporter's words name (a GeForce named in words: "my GTX 1080 Ti"; at most a warning). GPUs not named, or a
      professional
      RTX/Quadro part: beside an 803 or 804, a warning that gives the commands that
      decide (`nvidia-smi`, `ldconfig -p | grep libcuda`, `echo "${LD_LIBRARY_PATH-}"`), never a guess.
    - A program's error 804 says itself that a GPU CUDA sees does not support forward compatibility: with a compat
      directory the evidence shows set on the host (anything but an image's `/usr/local/cuda/compat`), this finding
      is critical and leads over GH601's reading of the 804 (a driver too old for the program's CUDA): the compat
      directory is taken off the loader path first.
    - A program's error 804 on a GeForce or TITAN (named by nvidia-smi, lspci, else the reporter's words) with no
      container in the evidence (no NVIDIA image banner or `/opt/nvidia` entrypoint, no `docker run --gpus`, no
      container-toolkit line, no image's `/usr/local/cuda/compat`: parsers/container_run.py), and no compat libcuda
      shown: outside a container neither an NVIDIA image's entrypoint nor the container toolkit's cuda-compat hook
      enables forward compatibility, so the libcuda CUDA took is a compat copy on the host's loader path. Critical (a
      warning when only the reporter's words name the GPU, raised by the program's 804 line it explains), leading over
      GH601's reading of the 804, with the commands that find the copy (`ldconfig -p | grep libcuda`, `ls -d
      /usr/local/cuda*/compat`, `grep -rs compat /etc/ld.so.conf /etc/ld.so.conf.d`) and the step that takes it off.
      Inside a container the same 804 is GH601's: the host driver is older than the image's CUDA. A stale libcuda
      newer than the module (not in a compat directory) explains a program's 804 the same way outside a container.
    - Without a path: nvidia-smi's CUDA Version is that of the libcuda it loaded (NVML's
      nvmlSystemGetCudaDriverVersion reads it from the library), so a release whose bundled driver branch is above
      the module's (12.9 on a 570 driver) is a forward-compat libcuda, and one below the newest release the module's
      branch bundles (12.9 on a 580 driver, whose own is 13.0) an older compat or stale libcuda; judged as above,
      with the commands that find the file. Branches are compared, and a release the table lacks decides nothing.
    - The driver's version not in the evidence: a warning saying when such a copy is right. Beside a CUDA error 803 it
      is the cause of that error (NVIDIA/nvidia-container-toolkit#1679), and the finding leads.

    Why it matters:
    libcuda must match the kernel module exactly. A stale copy, left by an earlier `.run` install in
    `/usr/lib64` or `/usr/local/lib`, a cuda-compat directory on the loader path, or a second driver
    package, makes every CUDA program fail at `cuInit` ("CUDA driver version is insufficient",
    "system has unsupported display driver / cuda driver combination", error 803) while nvidia-smi,
    which uses NVML, looks healthy.

    How to fix:
    Find every copy (`ldconfig -p | grep libcuda`, or a search of the file system for libcuda.so*),
    remove the one that does not match the module (or reinstall the driver packages, which puts the
    right one back), and run `sudo ldconfig`.

    Exceptions:
    A forward-compatibility libcuda newer than the module is intended on data-center GPUs and is not reported unless
    CUDA fails beside it. Without the module's version, or without where
    libcuda.so.1 points, nothing can be compared: the check is skipped, so a CUDA error 803 keeps a stale libcuda
    among its open causes.
    """
    if forward_compat_libcuda(snapshot) is None and compat_package(snapshot) is None:
        # no compat libcuda shown: CUDA's own error 804 on a GeForce, outside any container, says one is loaded
        bare = _refused_on_bare_host(snapshot)
        if bare is not None:
            yield bare
            return
    if snapshot.cuda is None and forward_compat_libcuda(snapshot) is None and compat_package(snapshot) is None:
        yield Skip(snapshot.unavailable.get("cuda") or "no cuda evidence")
        return
    judged = list(_stale_or_compat(snapshot))
    yield from judged
    lines = [m for m in snapshot.messages or () if m.signature and not m.reported
             and signature(m.signature).code == "GH603"]
    if lines and not judged:
        # a line names a compat or stub libcuda the loader evidence given does not show: not ruled out, the line stands
        yield Skip("a line names the libcuda the program loaded, which the loader evidence given does not show: "
                   + lines[0].line[:120])


def _stale_or_compat(snapshot: Snapshot) -> Iterator[Draft | Skip]:
    compat = forward_compat_libcuda(snapshot) or compat_package(snapshot)
    if compat is not None:
        yield from _judge_compat(snapshot, compat)
        return
    state = _cuda(snapshot)
    if state.libcuda_path is None:
        if "cuda_ldconfig" in snapshot.unavailable:
            yield Skip(snapshot.unavailable["cuda_ldconfig"])
        return
    module = module_version(snapshot)
    if module is None or state.libcuda_version is None:
        # nothing to compare: "found nothing" here would rule a stale libcuda out of a differential it never judged
        yield Skip("the loaded kernel module's version (cat /proc/driver/nvidia/version) or the version of the "
                   "libcuda.so.1 the loader resolves (where its link points) is not in the evidence")
        return
    kernel = stale_libcuda_of(snapshot)
    if kernel is None:
        return
    others = [f"{e.name} ({e.flags}) => {e.path}" for e in state.libraries if e.name.startswith("libcuda.so")]
    yield Draft(
        Severity.CRITICAL,
        f"The loader resolves libcuda {state.libcuda_version} ({state.libcuda_path}) but the kernel module is "
        f"{kernel}: CUDA programs fail at initialisation",
        evidence=(Evidence("ldconfig -p", tuple(others[:6])),
                  Evidence(f"readlink {state.libcuda_path}", (state.libcuda_target or "",)),
                  Evidence(PROC_VERSION, (f"kernel module {kernel}",))),
        # the table's looks, then for the file found: which package owns it, its removal (the table's step in words)
        fixes=(*(f for f in table_fixes("GH603") if f.is_command),
               *fixes_for(debian=["dpkg -S {libcuda_path:path}"], rhel=["rpm -qf {libcuda_path:path}"],
                          libcuda_path=state.libcuda_path),
               slotted("sudo rm {libcuda_path:path} && sudo ldconfig", note="only if that file belongs to no installed "
                       "driver package", libcuda_path=state.libcuda_path)),
        explains=("GH605", *_stale_explains_804(snapshot, state.libcuda_version, kernel)),
    )


def _stale_explains_804(snapshot: Snapshot, libcuda: str, kernel: str) -> tuple[str, ...]:
    """("GH601",) when a program's error 804 is this stale libcuda's doing: the copy is newer than the module (CUDA
    took it for a forward-compatibility libcuda) and nothing shows a container (where the 804 is the host driver
    older than the image's CUDA, GH601's); else ()."""
    refused = any(m.signature == COMPAT_ERRORS[1] for m in compat_errors(snapshot))
    newer = version_key(libcuda) > version_key(kernel)
    return ("GH601",) if refused and newer and container_context(snapshot) is None else ()


def _is_compat(path: str | None, target: str | None) -> bool:
    """A CUDA forward-compatibility copy: cuda-compat installs libcuda under ``.../compat/``."""
    return "/compat/" in (path or "") or "/compat/" in (target or "")


# --------------------------------------------------------------------------- forward compatibility (GH603, GH601)
#
# NVIDIA's CUDA Compatibility guide, "Forward Compatibility"
# <https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html>: the cuda-compat-<major>-<minor>
# package installs the libcuda of the driver that CUDA release bundles under /usr/local/cuda-X.Y/compat (NVIDIA's
# CUDA images carry it under /usr/local/cuda/compat). It is for running a CUDA newer than the installed driver, and
# only on data-center GPUs, select NGC Server Ready RTX SKUs and Jetson: on other GPUs CUDA fails with
# CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804), and a compat libcuda that does not pair with the kernel driver fails
# with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803) (CUDA Driver API, enum CUresult). A compat libcuda no newer than the
# driver has nothing to add and is not to be used.

_COMPAT_DIR = lazy_re(r"/(?:cuda-)?compat(?:/|$)")
# the catalogue rows of the two errors forward compatibility raises (knowledge/signatures.csv)
COMPAT_ERRORS = ("cuda-system-driver-mismatch", "cuda-compat-not-supported")
# names of GPUs the guide excludes from forward compatibility: consumer parts
_CONSUMER = guarded_re(r"GeForce|TITAN", re.IGNORECASE, may=has_folded("geforce", "titan"))
LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
# what a driver too old for the program's CUDA explains once forward compatibility was tried on a GPU without it: the
# compat libcuda's finding (GH603), the 803 left undiagnosed (GH901), the framework that cannot use the GPU (GH610)
COMPAT_SYMPTOMS = ("GH603", "GH901", "GH610")


@record
class CompatLibcuda:
    """A forward-compatibility libcuda the loader takes before the driver's own, and where the evidence shows it."""

    path: str  # the directory (LD_LIBRARY_PATH, ld.so.conf) or the library file (ldconfig -p, ldd)
    where: str  # "LD_LIBRARY_PATH", "/etc/ld.so.conf.d/00-cuda-compat.conf", "ldconfig -p", "ldd"
    cuda: str | None  # the CUDA release it comes from: cuda-12.9/compat -> "12.9"
    version: str | None  # its driver version: libcuda.so.575.51.03, else the driver that CUDA release bundles
    ld_path: tuple[str, ...] = ()  # LD_LIBRARY_PATH's entries, when that is where it is
    exact: bool = False  # ``version`` is the file's own (libcuda.so.<version>), not the release's bundled driver


def is_compat_dir(path: str) -> bool:
    """A cuda-compat directory or a file in one: ``/usr/local/cuda-12.9/compat``, ``/usr/local/cuda/compat/lib``."""
    return bool(_COMPAT_DIR.search(path)) and "cuda" in path.lower()


def forward_compat_libcuda(snapshot: Snapshot) -> CompatLibcuda | None:
    """The forward-compatibility libcuda the evidence shows the loader taking first, else None: LD_LIBRARY_PATH
    (searched before the loader's cache), the libcuda.so.1 ``ldconfig -p`` resolves, an ld.so.conf directory, a file
    ldd names."""
    state = snapshot.cuda
    if state is None:
        return _reported_by_nvml(snapshot)
    env_path = state.ld_library_path or tuple(p for p in snapshot.env.get(LD_LIBRARY_PATH, "").split(":") if p)
    found: tuple[str, str] | None = None
    for path in env_path:
        if is_compat_dir(path):
            found = (path, LD_LIBRARY_PATH)
            break
    if found is None and state.libcuda_path and _is_compat(state.libcuda_path, state.libcuda_target):
        found = (state.libcuda_path, "ldconfig -p")
    if found is None:
        entry = next((e for e in state.ld_so_conf if is_compat_dir(e.directory)), None)
        if entry is not None:
            found = (entry.directory, LD_LIBRARY_PATH if entry.directory in env_path else entry.file)
    if found is None:
        used = next((f for f in state.library_files if "libcuda.so" in f and is_compat_dir(f)), None)
        found = (used, "ldd") if used else None
    if found is None:
        return _reported_by_nvml(snapshot)
    path, where = found
    cuda = _cuda_dir_version(path, state) or (state.base_image_cuda if path.startswith("/usr/local/cuda/") else None)
    version = state.libcuda_version if path == state.libcuda_path else None
    exact = version is not None
    if version is None and cuda and (bundled := requirement(cuda)) is not None:
        version = bundled.driver_min
    return CompatLibcuda(path, where, cuda, version, env_path if where == LD_LIBRARY_PATH else (), exact)


NVML_CUDA = "nvidia-smi's CUDA Version"
# the CUDA repository's forward-compatibility package, one per CUDA release: cuda-compat-12-9 installs the libcuda
# of the driver CUDA 12.9 bundles under /usr/local/cuda-12.9/compat (CUDA Compatibility guide, Forward Compatibility;
# the package list of https://developer.download.nvidia.com/compute/cuda/repos/)
_COMPAT_PACKAGE = lazy_re(r"^cuda-compat-(?P<major>\d{1,2})-(?P<minor>\d{1,2})$")


COMPAT_PACKAGE_WHERE = "the cuda-compat-"  # CompatLibcuda.where of a package: "the cuda-compat-12-9 package (dpkg -l)"


def compat_package(snapshot: Snapshot) -> CompatLibcuda | None:
    """The cuda-compat-X-Y package a listing (or the reporter's words) shows installed, beside a CUDA error 803 or 804:
    installed, the package is on the loader path only where LD_LIBRARY_PATH (or an ld.so.conf file) names its
    directory, but those errors say CUDA took a forward-compatibility libcuda, and the package is where it comes from.
    Its version is the package's (575.57.08-0ubuntu1: that libcuda's), else the driver its CUDA release bundles."""
    if snapshot.host_env is None or not compat_errors(snapshot):
        return None
    named = [(p, m) for p in snapshot.host_env.packages if (m := _COMPAT_PACKAGE.match(p.name)) is not None]
    if not named:
        return None
    package, match = max(named, key=lambda item: (int(item[1]["major"]), int(item[1]["minor"])))
    cuda = f"{match['major']}.{match['minor']}"
    version = driver_version_of(package.version)
    if version is None and (bundled := requirement(cuda)) is not None:
        version = bundled.driver_min
    where = f"the {package.name} package ({snapshot.host_env.package_source or 'installed packages'})"
    return CompatLibcuda(f"/usr/local/cuda-{cuda}/compat", where, cuda, version,
                         exact=driver_version_of(package.version) is not None)


def _branch(version: str | None) -> int | None:
    key = version_key(version)
    return key[0] if key else None


def nvml_libcuda_release(snapshot: Snapshot) -> str | None:
    """"newer" or "older" when the CUDA Version nvidia-smi (NVML) reports is not the kernel driver's own release, else
    None. NVML reads it from the libcuda it loads (nvmlSystemGetCudaDriverVersion: "retrieved from the currently
    installed version of CUDA", cuDriverGetVersion), so a release whose bundled driver branch is above the module's
    is a forward-compat libcuda, and one below the newest release the module's branch bundles is an older libcuda
    (compat or stale). Branches, not releases, are compared; a CUDA release the table lacks decides nothing."""
    driver, reported = module_version(snapshot), _driver_max_cuda(snapshot)
    branch = _branch(driver)
    ga = requirement(reported)
    if branch is None or ga is None or _branch(ga.driver_min) is None:
        return None
    if _branch(ga.driver_min) > branch:
        return "newer"
    newest = max(minor_releases(), key=lambda r: version_key(r.driver_min))
    if branch > (_branch(newest.driver_min) or 0):
        return None  # a branch newer than the table: its own release is not known
    reported_key = version_key(reported)[:2]
    if any(version_key(r.cuda)[:2] > reported_key and (_branch(r.driver_min) or 0) <= branch
           for r in minor_releases()):
        return "older"
    return None


def _native_cuda(driver: str | None) -> str | None:
    """The newest CUDA release whose bundled driver's branch the kernel driver's branch reaches (580.x -> 13.0), or
    None for a branch the table does not reach."""
    branch = _branch(driver)
    rows = [r for r in minor_releases() if (_branch(r.driver_min) or 0) <= (branch or 0)]
    newest = max(minor_releases(), key=lambda r: version_key(r.driver_min))
    if branch is None or not rows or branch > (_branch(newest.driver_min) or 0):
        return None
    return max(rows, key=lambda r: version_key(r.cuda)).cuda


def _reported_by_nvml(snapshot: Snapshot) -> CompatLibcuda | None:
    """The libcuda nvidia-smi loaded, when its CUDA Version shows it is another release than the driver's own: newer is
    a forward-compat libcuda; older a compat (or stale) one. Its path is not in the evidence."""
    relation = nvml_libcuda_release(snapshot)
    reported = _driver_max_cuda(snapshot)
    if relation is None or reported is None:
        return None
    bundled = requirement(reported)
    return CompatLibcuda(f"the libcuda of CUDA {reported} that nvidia-smi loaded", NVML_CUDA, reported,
                         bundled.driver_min if bundled else None)


def compat_errors(snapshot: Snapshot) -> list[MessageLine]:
    """The lines of CUDA error 803 or 804 a program printed (not the reporter's words)."""
    return [m for m in snapshot.messages or () if m.signature in COMPAT_ERRORS and not m.reported]


# NVIDIA's CUDA images keep their cuda-compat under /usr/local/cuda/compat (the NGC entrypoint puts
# /usr/local/cuda/compat/lib.real on LD_LIBRARY_PATH when the host's driver is older than the image's CUDA and the
# compat libcuda initialises); the cuda-compat-X-Y package a person installs on a host lands in
# /usr/local/cuda-X.Y/compat
IMAGE_COMPAT = "/usr/local/cuda/compat"


def set_by_hand(compat: CompatLibcuda) -> bool:
    """Whether the evidence shows this compat libcuda put on the loader path on the host rather than by a CUDA image:
    a cuda-compat-X-Y directory on LD_LIBRARY_PATH, in ld.so.conf, ldconfig -p or ldd, the package installed, or the
    libcuda nvidia-smi loaded. Beside error 804 its removal leads (GH603) over the driver upgrade the 804 otherwise
    asks for (GH601): the program ran on that driver's own libcuda before the compat directory was added."""
    return not compat.path.startswith(IMAGE_COMPAT)


def unsupported_reported(failed: list[MessageLine]) -> bool:
    """Whether a program's error 804 is among the lines: CUDA itself then says a visible GPU does not support forward
    compatibility (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE), whatever its name shows."""
    return any(m.signature == COMPAT_ERRORS[1] for m in failed)


def forward_compat_gpu(snapshot: Snapshot) -> str | None:
    """Whether the guide lets these GPUs use forward compatibility: "datacenter" (every GPU named is one), "consumer"
    (a GeForce or TITAN is named: never), None when no GPU is named or a professional RTX/Quadro part is (select
    NGC Server Ready SKUs are supported, others not: the name alone does not decide). The names are nvidia-smi's or
    NVML's, else lspci's ("GA102 [GeForce RTX 3090]")."""
    names = [g.name for g in snapshot.gpus if g.name] or [
        d.name for d in snapshot.pci_devices or () if d.is_nvidia_gpu and d.name]  # lspci's "GA102 [GeForce RTX 3090]"
    if not names:  # no program lists the GPUs: the product lines of the models the words name (reported)
        lines = {g.line for g in snapshot.gpus_named}
        if "geforce" in lines:
            return "consumer"
        return "datacenter" if lines == {"datacenter"} else None
    if any(_CONSUMER.search(n) for n in names):
        return "consumer"
    return "datacenter" if all(is_datacenter(n) for n in names) else None


def _compat_newer(compat: CompatLibcuda, driver: str, max_cuda: str | None) -> bool | None:
    """Whether the compat libcuda is newer than the kernel driver (the only way the guide uses it); None: unknown.
    Its own version against the module's; a release's bundled driver by branch (any 580 driver runs CUDA 13.0);
    else its release against the driver's CUDA Version, unless that Version is the compat libcuda's own."""
    if compat.version and compat.exact:
        return version_key(compat.version) > version_key(driver)
    if compat.version and _branch(compat.version) is not None and _branch(driver) is not None:
        return (_branch(compat.version) or 0) > (_branch(driver) or 0)
    if compat.cuda and max_cuda and compat.where != NVML_CUDA:
        return version_key(compat.cuda)[:2] > version_key(max_cuda)[:2]
    return None


def _judge_compat(snapshot: Snapshot, compat: CompatLibcuda) -> Iterator[Draft]:
    """GH603 for a forward-compat libcuda first on the loader path, judged by the guide: a copy no newer than the
    driver must go (critical); a newer one on a GeForce cannot work (the driver must be upgraded: GH601 names the
    program's CUDA when the evidence gives it); on data-center GPUs it is the intended use unless CUDA fails."""
    driver = module_version(snapshot) or driver_version(snapshot)[0]
    failed = compat_errors(snapshot)
    shown = _compat_evidence(snapshot, compat) + tuple(Evidence(m.source, (m.line[:300],)) for m in failed[:2])
    if compat.where == NVML_CUDA:  # only nvidia-smi's CUDA Version shows it: which file is not known
        origin = (f"a libcuda of CUDA {compat.cuda} (driver branch {_branch(compat.version)}; {NVML_CUDA}: "
                  "a cuda-compat copy, or a stale one)")
    else:
        origin = f"the forward-compatibility libcuda {compat.path} ({compat.where}"
        origin += f", from CUDA {compat.cuda}" if compat.cuda else ""
        origin += f", driver {compat.version})" if compat.version else ")"
    # 804 says a visible GPU does not support forward compatibility; a compat set on the host then leads over GH601
    refused = unsupported_reported(failed)
    leads = ("GH605", "GH601") if refused and set_by_hand(compat) else ("GH605",)
    if driver is None and refused:
        yield Draft(Severity.CRITICAL, f"The loader takes {origin} ahead of the driver's own, and CUDA error 804 "
                    "says a GPU it sees does not support forward compatibility (only data-center GPUs, select NGC "
                    "Server Ready RTX parts and Jetson do): take it off the loader path, so the driver's own libcuda "
                    "runs the program (any CUDA of the driver's major family, by minor version compatibility); a "
                    "program that needs a newer CUDA than the driver supports needs a driver upgrade", evidence=shown,
                    fixes=_compat_fixes(compat, removal_first=True), explains=leads)
        return
    if driver is None:
        yield Draft(Severity.WARNING, f"The loader takes {origin} ahead of the driver's own: the CUDA Compatibility "
                    "guide supports it only on data-center GPUs and only with a kernel driver older than it; otherwise "
                    "CUDA fails with error 803 or 804", evidence=shown, fixes=_compat_fixes(compat, deciding=True),
                    explains=("GH605",))
        return
    max_cuda = _driver_max_cuda(snapshot) if nvml_libcuda_release(snapshot) is None else _native_cuda(driver)
    newer = _compat_newer(compat, driver, max_cuda)
    gpu = forward_compat_gpu(snapshot)
    driver_shown = Evidence("driver", (f"kernel driver {driver}" + (f" (CUDA {max_cuda})" if max_cuda else ""),))
    if newer is False:
        yield Draft(Severity.CRITICAL, f"The loader takes {origin} ahead of the driver's own, but kernel driver "
                    f"{driver} already supports {('CUDA ' + compat.cuda) if compat.cuda else 'it'}: a compat libcuda "
                    "no newer than the driver must not be used (CUDA Compatibility guide); CUDA fails with error 803",
                    evidence=(*shown, driver_shown), fixes=_compat_fixes(compat), explains=("GH605",))
        return
    if (gpu == "consumer" and (newer or failed)) or (gpu is None and refused):
        names = [_consumer_name(snapshot) if gpu == "consumer" else "a GPU CUDA sees (error 804)"]
        needs = f" to {compat.version} or newer" if newer and compat.version else ""
        family = family_minimum(compat.cuda)
        if family and version_key(driver) >= version_key(family.driver_min):
            # the guide's minor version compatibility: any CUDA of that major family runs on this driver without it
            advice = (f"remove the compat libcuda: driver {driver} runs CUDA {compat.cuda} through minor version "
                      f"compatibility (CUDA {family.cuda}.x on drivers >= {family.driver_min}), or upgrade the "
                      f"driver{needs}")
        else:
            advice = (f"upgrade the driver{needs} instead, or remove the compat libcuda and run a CUDA the driver "
                      "supports")
        yield Draft(Severity.CRITICAL if failed else Severity.WARNING,
                    f"The loader takes {origin}, but forward compatibility is not supported on {names[0]} (only "
                    f"data-center GPUs and select NGC-ready RTX parts): {advice}",
                    evidence=(*shown, driver_shown),
                    fixes=_compat_fixes(compat, upgrade=compat.version, removal_first=advice.startswith("remove")),
                    explains=leads)
        return
    if not failed:
        return  # newer than the driver, on GPUs that may use it: the guide's intended use
    where = "on data-center GPUs" if gpu == "datacenter" else "if these GPUs support forward compatibility"
    yield Draft(Severity.CRITICAL if gpu == "datacenter" else Severity.WARNING,
                f"CUDA fails with {origin} on kernel driver {driver}: {where}, the CUDA Compatibility guide requires "
                "the cuda-compat package of the CUDA the program needs, newer than the kernel driver, on a driver "
                "branch the guide lists for forward compatibility (a kernel driver upgraded within its branch may need "
                "a newer cuda-compat); 804 means a visible GPU does not support it",
                evidence=(*shown, driver_shown), fixes=_compat_fixes(compat, deciding=gpu != "datacenter",
                                                                     upgrade=compat.version, pairing=True),
                explains=leads)


def container_context(snapshot: Snapshot) -> Evidence | None:
    """What shows the CUDA program ran inside a container, else None: a pasted line (an NVIDIA image's banner or
    entrypoint, `docker run --gpus`, a container-toolkit line: parsers/container_run.py), gpuhealth itself running
    inside one (the live check), a container run of a CUDA image or a Dockerfile built on one, an image's compat
    directory (/usr/local/cuda/compat) on the loader path. There CUDA's error 804 is the host driver older than the
    image's CUDA (the toolkit's cuda-compat hook and the NGC entrypoint enable the image's compat libcuda then: GH601);
    without it, on a host, only a compat libcuda put on the loader path by hand is loaded (GH603)."""
    if snapshot.container_lines:
        return Evidence(snapshot.sources.get("container_lines", "the evidence"), snapshot.container_lines[:2])
    env = snapshot.host_env
    if env is not None and env.container:
        return Evidence(env.container_evidence or "container", (f"running inside {env.container}",))
    state = snapshot.cuda
    if state is not None and (state.image_command or state.base_image):
        shown = state.image_command or f"FROM {state.base_image}"
        return Evidence(snapshot.sources.get("cuda", "the evidence"), (shown[:200],))
    compat = forward_compat_libcuda(snapshot)
    if compat is not None and not set_by_hand(compat):
        return Evidence(compat.where, (compat.path,))
    return None


def _refused_on_bare_host(snapshot: Snapshot) -> Draft | None:
    """GH603 for a program's CUDA error 804 on a GeForce or TITAN where nothing shows a container: the CUDA
    Compatibility guide's forward compatibility (cuda-compat) is for data-center GPUs only, and outside a container no
    NVIDIA image or container toolkit enables it, so the libcuda CUDA took is a compat copy on this host's loader path
    (a cuda-compat-X-Y directory on LD_LIBRARY_PATH or in ld.so.conf, a conda cuda-compat). Taking it off lets the
    driver's own libcuda run the program. A GeForce named only in the reporter's words makes it a warning, which the
    program's critical 804 line it explains raises (diagnosis._explainers_of_machine_lines). None otherwise."""
    refused = [m for m in compat_errors(snapshot) if m.signature == COMPAT_ERRORS[1]]
    if not refused or forward_compat_gpu(snapshot) != "consumer" or container_context(snapshot) is not None:
        return None
    gpu = _consumer_name(snapshot)
    listed = [g.name for g in snapshot.gpus if g.name] + [
        d.name for d in snapshot.pci_devices or () if d.is_nvidia_gpu and d.name]
    if any(_CONSUMER.search(n) for n in listed):
        named = Evidence(snapshot.sources.get("smi" if snapshot.gpus else "pci_devices", "the GPU list"), (gpu,))
        severity, labels = Severity.CRITICAL, {}
    else:  # the product line of a model the reporter's words name
        words = next((g.words for g in snapshot.gpus_named if g.line == "geforce"), gpu)
        named = Evidence(REPORTED_WORDS, (words[:300],))
        severity, labels = Severity.WARNING, {"reported": "words"}
    driver = module_version(snapshot)
    return Draft(
        severity,
        f"CUDA error 804 on {gpu}, with no container in the evidence: a forward-compatibility libcuda (cuda-compat) on "
        "this host's loader path was loaded instead of the driver's own, and GeForce and TITAN GPUs cannot use it "
        "(only data-center GPUs, select NGC Server Ready RTX parts and Jetson can). Take the compat directory off the "
        "loader path; the driver's own libcuda then runs any CUDA it supports"
        + (f" (driver {driver})" if driver else "") + ". In a container, this error is instead the host driver being "
        "older than the image's CUDA (GH601)",
        evidence=(*(Evidence(m.source, (m.line[:300],)) for m in refused[:2]), named,
                  Evidence("container", ("none shown: no NVIDIA image banner or entrypoint, no `docker run --gpus`, "
                                         "no container-toolkit line",))),
        fixes=table_fixes("GH603", kind=COMPAT_ERRORS[1]),
        explains=("GH605", "GH601"),
        labels=labels,
    )


def _compat_evidence(snapshot: Snapshot, compat: CompatLibcuda) -> tuple[Evidence, ...]:
    state = snapshot.cuda or CudaState()
    listed = [f"{e.name} ({e.flags}) => {e.path}" for e in state.libraries if e.name.startswith("libcuda.so")]
    if compat.where == NVML_CUDA:
        driver = module_version(snapshot)
        shown = [Evidence(snapshot.sources.get("smi", "nvidia-smi"),
                          (f"Driver Version: {driver}  CUDA Version: {compat.cuda} (the CUDA of the libcuda it "
                           f"loaded; driver {driver}'s own is another release)",))]
    else:
        shown = [Evidence(compat.where, (compat.path,))] if compat.where != "ldconfig -p" else []
    if listed:
        shown.append(Evidence("ldconfig -p", tuple(listed[:6])))
    return tuple(shown)


def _compat_fixes(compat: CompatLibcuda, deciding: bool = False, upgrade: str | None = None,
                  pairing: bool = False, removal_first: bool = False) -> tuple[Fix, ...]:
    """The looks that decide (the driver, every libcuda, the path), then the removal of that compat libcuda where the
    evidence shows it set: LD_LIBRARY_PATH without it, its ld.so.conf.d file, else a step; a driver upgrade first
    when the GPU cannot use forward compatibility, unless ``removal_first`` (minor version compatibility runs the
    program without the compat libcuda). ``pairing``: forward compatibility is the intent (a data-center GPU), so
    instead of the removal, the guide's rule for the package to install."""
    looks = (Fix("nvidia-smi", "any", note="the driver and the GPUs"), *table_fixes("GH603")[:1],
             Fix('echo "${LD_LIBRARY_PATH-}"', "any", note="a compat directory there is searched first"))
    if deciding:
        return looks
    branch = (upgrade or "").split(".")[0]
    upgrades = fixes_for(debian=["sudo apt-get install cuda-drivers-{branch:number}"],
                         rhel=["sudo dnf install cuda-drivers-{branch:number}"], disruptive=True,
                         branch=branch) + (REBOOT,) if branch else ()
    if pairing:
        package = f"cuda-compat-{compat.cuda.replace('.', '-')}" if compat.cuda else "cuda-compat-<major>-<minor>"
        return (*looks, Fix("Install the cuda-compat package of the CUDA the program needs, from NVIDIA's repository, "
                            "and check that the kernel driver's branch is one the CUDA Compatibility guide supports "
                            "for it; else upgrade the driver to one that supports that CUDA itself", "any",
                            kind="step", note=f"the one on the loader path: {package}"), *upgrades)
    if compat.where == LD_LIBRARY_PATH:
        # the shell's own value without that one directory, whatever else it holds (the evidence may show only part)
        removal = (slotted("export LD_LIBRARY_PATH=\"$(printf '%s' \"$LD_LIBRARY_PATH\" | tr ':' '\\n' | "
                           "grep -vxF {directory:path} | paste -sd: -)\"", directory=compat.path,
                           note="in the shell that runs the program; then remove it where it is set (shell profile, "
                                "service unit, the image's ENV LD_LIBRARY_PATH)"),)
    elif compat.where.startswith("/etc/ld.so.conf"):
        removal = (slotted("sudo rm {conf_file:path} && sudo ldconfig", note=f"it adds {compat.path}",
                           conf_file=compat.where),)
    else:
        removal = (Fix("Remove the compat libcuda from the loader path (the /etc/ld.so.conf.d entry that names its "
                       "directory, or LD_LIBRARY_PATH; in a container, the image's compat directory), then run sudo "
                       "ldconfig", "any", kind="step", note=f"the copy: {compat.path}"),)
    if compat.where.startswith(COMPAT_PACKAGE_WHERE) and compat.cuda:
        # the package itself: removed, its libcuda leaves the host, and the container toolkit no longer injects it into
        # containers (NVIDIA/nvidia-docker#1515, the maintainer's fix); cuda-compat-X-Y as the CUDA repository names it
        package = f"cuda-compat-{compat.cuda.replace('.', '-')}"
        removal = (*fixes_for(debian=["sudo apt-get remove {package:package}"],
                              rhel=["sudo dnf remove {package:package}"], package=package), *removal)
    return (*looks, *removal, *upgrades) if removal_first else (*looks, *upgrades, *removal)


# --------------------------------------------------------------------------- GH604


@check("GH604", "persistence-off", "Persistence mode off on a GPU server", reads=("gpus", "cuda"))
def persistence_off(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    On a server (a data-center GPU such as A100/H100/L40S, or more than one GPU) a GPU reports
    persistence mode off, and `systemctl is-active nvidia-persistenced` does not say `active`.

    Why it matters:
    Without persistence the driver tears the GPUs down whenever the last process closes them and
    initialises them again on the next open: every job and every nvidia-smi pays seconds per GPU at
    start, ECC and clock settings can be lost, and monitoring adds load. NVIDIA recommends the
    `nvidia-persistenced` daemon on Linux servers; the legacy `nvidia-smi -pm 1` does not survive a
    reboot and is deprecated in favour of the daemon.

    How to fix:
    `sudo systemctl enable --now nvidia-persistenced` (the unit ships with the driver packages; with a
    `.run` install, install it from `/usr/share/doc/NVIDIA_GLX-1.0/samples/nvidia-persistenced-init.tar.bz2`).
    Confirm with `nvidia-smi -q | grep -i persistence`.

    Without the daemon's state (a pasted `nvidia-smi` or `nvidia-smi -q`): data-center GPUs showing
    persistence off are a warning (the daemon's default is to turn it on, so it is not running or was told
    not to); several consumer GPUs are info. On GPUs in MIG mode it is info: there the question the
    evidence answers first is which MIG devices a process sees (GH608), and persistence is only a start-up cost.

    A daemon that runs but was started with `--no-persistence-mode` (the ExecStart of Ubuntu's packaged unit)
    forces persistence off on every GPU: a warning, fixed by an override without the flag (`sudo systemctl edit
    --full nvidia-persistenced`, remove `--no-persistence-mode` from `ExecStart=`, then `sudo systemctl restart
    nvidia-persistenced`). A live check reads the running daemon's command line from `/proc/<pid>/cmdline`, the pid
    being the unit's MainPID that systemd shows, else the unit's ExecStart from the same answer; pasted, from
    `systemctl status nvidia-persistenced` (its `Process:` line and CGroup tree) or a `ps aux` / `ps -ef` row.

    A pasted unit state alone (the status of the nvidia-persistenced unit, no GPUs in the evidence): a unit
    that failed is a warning; one that could not be found (not installed) or is stopped is information,
    since whether the host is a server is not known.

    Exceptions:
    Desktops and laptops with one consumer GPU (power saving matters more there). A daemon known to run
    without that flag is not reported: GPUs shown off are then being switched on, or were switched off by
    hand (`nvidia-smi -pm 0`).
    """
    gpus = snapshot.gpus or ()
    state = snapshot.cuda
    forced = state is not None and state.persistenced_active == "active" and \
        NO_PERSISTENCE in (state.persistenced_command or "")
    if not gpus:
        if forced and snapshot.smi_run is None and snapshot.nvml is None:
            # pasted evidence without nvidia-smi: the daemon's flag says persistence is off on every GPU, which GPUs
            # is not given (a live host whose nvidia-smi or NVML failed has its own finding: this would add to it)
            yield _persistence_forced_off(snapshot, [], 0)
            return
        if state is not None and snapshot.origin == "evidence" and snapshot.smi_run is None and snapshot.nvml is None \
                and (state.persistenced_active or "").split(" ")[0] in DAEMON_DOWN:
            yield _daemon_down(snapshot, state)
            return
        yield Skip(snapshot.unavailable.get("smi") or snapshot.unavailable.get("nvml")
                   or "no GPU data: neither nvidia-smi nor NVML reported a GPU")
        return
    off = [g for g in gpus if g.persistence_mode is False]
    datacenter = any(is_datacenter(g.name) for g in gpus)
    if not off or (len(gpus) < 2 and not datacenter):
        return
    if state is not None and state.persistenced_active == "active":
        # running: persistence is off only when the daemon was told so (a daemon that failed is the fault to fix)
        if forced:
            yield _persistence_forced_off(snapshot, off, len(gpus))
        return
    known = state is not None and bool(state.persistenced_active)
    unread = snapshot.unavailable.get("cuda_persistenced_active") or snapshot.unavailable.get("cuda")
    daemon = (f"nvidia-persistenced is {state.persistenced_active}" if state is not None and known else
              f"nvidia-persistenced state unknown ({unread})" if unread else
              "whether nvidia-persistenced runs is not in the evidence given")
    enabled = f"systemctl is-enabled: {state.persistenced_enabled}" if state and state.persistenced_enabled else None
    listed = ", ".join(str(g.index) for g in off if g.index is not None) or str(len(off))
    mig = any((g.mig_mode_current or "").lower() == "enabled" for g in off)
    # the daemon's default turns persistence on: off on a data-center GPU means it does not run (or runs with
    # --no-persistence-mode, which only its known state can tell); MIG GPUs' own question comes first (GH608)
    warn = known or (datacenter and not mig)
    yield Draft(
        Severity.WARNING if warn else Severity.INFO,
        f"Persistence mode is off on {len(off)} of {len(gpus)} GPU(s) and {daemon}",
        evidence=(Evidence(snapshot.sources.get("nvml") or snapshot.sources.get("smi") or "nvidia-smi -q",
                           tuple(f"GPU {g.index} {g.name or ''}: Persistence Mode: Disabled".replace("  ", " ")
                                 for g in off[:8])),
                  *((Evidence(snapshot.sources.get("cuda", "systemctl is-active nvidia-persistenced"),
                              tuple(x for x in (daemon, enabled) if x) + state.persistenced_errors[:3]),)
                    if state is not None else ())),
        fixes=tuple(replace(f, note=f"GPUs {listed}; preferred over nvidia-smi -pm 1")
                    if f.command == ENABLE_PERSISTENCED else f
                    for f in table_fixes("GH604", without=FORCED_OFF_FIXES[1:])),
    )


# what `systemctl status` / `journalctl -u` say of a daemon that does not run ("not-found" units read as inactive)
DAEMON_DOWN = ("inactive", "failed", "dead")


def _daemon_down(snapshot: Snapshot, state: CudaState) -> Draft:
    """A pasted unit state alone (no GPUs in the evidence): nvidia-persistenced is not installed, stopped or failed.
    Persistence mode is then off unless someone set it by hand, which matters on a server; whether this is one is
    not known: a laptop or desktop does well without it (GH604's exceptions), so a unit that is missing or stopped is
    information. A unit that failed was meant to run: a warning."""
    active = (state.persistenced_active or "").split(" ")[0]
    missing = state.persistenced_enabled == "not-found"
    what = ("is not installed (its unit could not be found)" if missing
            else "failed" if active == "failed" else "is not running")
    shown = ("nvidia-persistenced.service: not found (not installed)" if missing
             else f"Active: {state.persistenced_active}",)
    return Draft(
        Severity.WARNING if active == "failed" and not missing else Severity.INFO,
        f"nvidia-persistenced {what}: without it persistence mode is off (unless set with nvidia-smi -pm 1), and on a "
        "GPU server every job pays the GPUs' initialisation; the GPUs are not in the evidence given",
        evidence=(Evidence(snapshot.sources.get("cuda", "systemctl status nvidia-persistenced"),
                           shown + state.persistenced_errors[:3]),),
        fixes=table_fixes("GH604", without=FORCED_OFF_FIXES),
    )


def _persistence_forced_off(snapshot: Snapshot, off: list[Gpu], total: int) -> Draft:
    """nvidia-persistenced runs with ``--no-persistence-mode``: the daemon's state says
    persistence is off on purpose, so "enable the daemon" would change nothing. Without the GPUs in the evidence
    (``total`` 0: a pasted process listing or unit status alone) it is information: whether this is a server, where
    it matters, is not known."""
    state = snapshot.cuda
    assert state is not None
    daemon = "nvidia-persistenced is active"
    source = state.persistenced_command_source or snapshot.sources.get("cuda", "systemctl status nvidia-persistenced")
    if total:
        message = (f"Persistence mode is off on {len(off)} of {total} GPU(s): {daemon} but was started with "
                   f"{NO_PERSISTENCE}, which forces it off")
        gpu_lines = (Evidence(snapshot.sources.get("nvml") or snapshot.sources.get("smi") or "nvidia-smi -q",
                              tuple(f"GPU {g.index} {g.name or ''}: Persistence Mode: Disabled".replace("  ", " ")
                                    for g in off[:8])),)
    else:
        message = (f"{daemon} but was started with {NO_PERSISTENCE}, which forces persistence mode off on every "
                   "GPU (the GPUs, and whether this is a server, are not in the evidence given)")
        gpu_lines = ()
    return Draft(
        Severity.WARNING if total else Severity.INFO,
        message,
        evidence=(*gpu_lines, Evidence(source, (daemon, f"command line: {state.persistenced_command}"))),
        # GH604's rows for a daemon that runs with the flag (knowledge/fixes.csv): the override, the restart, the look
        fixes=table_fixes("GH604", without=(ENABLE_PERSISTENCED, FORCED_OFF_FIXES[0])),
    )


# --------------------------------------------------------------------------- GH605


@check("GH605", "torch-cannot-use-gpu", "PyTorch is installed but cannot use the GPUs", requires=("torch",))
def torch_cannot_use_gpu(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    PyTorch, imported by the host's `python3` (or described by a pasted `collect_env`), reports
    `torch.cuda.is_available()` False while the host has NVIDIA GPUs. The finding says why, checking
    in order: the nvidia module not loaded (GH201), a driver/library mismatch (GH202), a stale libcuda
    on the loader path (GH603), a CPU-only wheel (`torch.version.cuda` None, version ending `+cpu`), a
    driver too old for the wheel's CUDA (the family minimums of NVIDIA's CUDA Compatibility guide, or
    PyTorch's "The NVIDIA
    driver on your system is too old" warning), `CUDA_VISIBLE_DEVICES` hiding every GPU (GH608),
    `nvidia_uvm` not loaded or `/dev/nvidia-uvm` missing (GH205, GH207), and MIG mode enabled without
    MIG instances.

    Why it matters:
    Training then silently runs on the CPU, hundreds of times slower, or stops at the first `.cuda()`
    with "Torch not compiled with CUDA enabled" or "no CUDA-capable device is detected".

    How to fix:
    Follow the fix of the cause named: reinstall a CUDA wheel from the index for a CUDA version the
    driver supports (`pip install --force-reinstall torch torchvision torchaudio --index-url
    https://download.pytorch.org/whl/cu<XY>`), upgrade the driver, unset or correct
    `CUDA_VISIBLE_DEVICES`, load nvidia_uvm (GH205), or create MIG instances.

    Exceptions:
    Hosts without an NVIDIA GPU (but a CPU-only wheel, version ending `+cpu`, in evidence that shows no
    GPU is a warning: it could not use one anyway). A PyTorch that is not installed is skipped, not
    judged. Where another
    check reports the root cause (GH201, GH202, GH603, GH608), the root is named here and GH603/GH608
    fold this finding under them.
    """
    torch = _torch(snapshot)
    if torch.installed is False:
        yield Skip("PyTorch is not installed for the python3 on PATH")
        return
    if (torch.torch_version or "").endswith("+cpu") and not torch.cuda_available and not _gpus_exist(snapshot):
        yield _cpu_only_build(snapshot, torch.torch_version or "")  # a report that shows no GPU (collect_env)
        return
    if torch.cuda_available or (torch.cuda_available is None and not torch.error):
        return  # True, or unknown without an error (a collect_env that did not say)
    if not _gpus_exist(snapshot):
        return
    causes: list[str] = []
    evidence: list[Evidence] = []
    fixes: list[Fix] = []
    source = snapshot.sources.get("torch", TORCH_SOURCE)
    evidence.append(Evidence(source, tuple(x for x in (
        f"torch {torch.torch_version or '?'}, torch.version.cuda = {torch.torch_cuda_version}",
        f"torch.cuda.is_available() = {torch.cuda_available}",
        torch.init_warning, torch.error) if x)))
    loaded = module_loaded(snapshot)
    if loaded is False:
        causes.append("the nvidia kernel module is not loaded (GH201)")
        fixes.append(Fix("sudo modprobe nvidia", "any", note="see GH201"))
    kernel = snapshot.driver.version if snapshot.driver else None
    user, user_source = user_space_version(snapshot)
    if kernel and user and kernel != user:
        causes.append(f"driver/library version mismatch: module {kernel}, libraries {user} (GH202)")
        fixes.append(REBOOT)
    stale = stale_libcuda_of(snapshot)
    if stale and snapshot.cuda is not None:
        causes.append(f"the loader resolves a stale libcuda {snapshot.cuda.libcuda_version} "
                      f"({snapshot.cuda.libcuda_path}) for kernel module {stale} (GH603)")
    wheel_cuda = torch.torch_cuda_version
    # PyTorch's "CUDA initialization: ... cudaGetDeviceCount()" warning is printed only by a CUDA build (c10/cuda,
    # CUDAFunctions.cpp device_count_impl): torch.version.cuda not shown is then no CPU-only build
    called_cuda = "cudaGetDeviceCount" in f"{torch.init_warning or ''} {torch.error or ''}"
    if (not wheel_cuda and not called_cuda) or (torch.torch_version or "").endswith("+cpu"):
        causes.append(f"a CPU-only PyTorch build ({torch.torch_version or 'torch'}: torch.version.cuda is None)")
        fixes.append(Fix(TORCH_REINSTALL,
                         "any", note="cu<XY> no newer than the CUDA Version nvidia-smi prints "
                                     f"({_driver_max_cuda(snapshot) or '?'})"))
    elif wheel_cuda:
        driver, driver_source = driver_version(snapshot)
        minimum = family_minimum(wheel_cuda) or requirement(wheel_cuda)
        too_old_warning = "too old" in (torch.init_warning or "") or "too old" in (torch.error or "")
        if too_old_warning or (driver and minimum and version_key(driver) < version_key(minimum.driver_min)):
            need = f"needs driver >= {minimum.driver_min}" if minimum else "needs a newer driver"
            causes.append(f"the driver ({driver or '?'}) is too old for the wheel's CUDA {wheel_cuda} ({need})")
            if driver:
                evidence.append(Evidence(driver_source, (f"driver {driver}",)))
            fixes.append(Fix(TORCH_REINSTALL,
                             "any", note="a wheel for an older CUDA the driver supports"))
            if minimum:
                fixes.extend(fixes_for(debian=["sudo apt-get install cuda-drivers-{branch}"],
                                       rhel=["sudo dnf install cuda-drivers-{branch}"],
                                       disruptive=True, branch=minimum.driver_min.split(".")[0]))
    for name, why in _visibility_problems(snapshot):
        if name == "CUDA_VISIBLE_DEVICES":
            causes.append(f"{why} (GH608)")
            evidence.append(Evidence("environment", (f"{name}={snapshot.env[name]}",)))
            fixes.append(Fix("unset CUDA_VISIBLE_DEVICES", "any", note="or list valid indices"))
    uvm_module = bool(loaded) and snapshot.module_listed("nvidia_uvm") is False
    uvm_node = snapshot.device_nodes is not None and loaded and "nvidia-uvm" not in snapshot.device_nodes
    if uvm_module or uvm_node:
        what = "nvidia_uvm is not loaded" if uvm_module else "/dev/nvidia-uvm is missing"
        causes.append(f"{what}: CUDA cannot initialise without it (GH205/GH207)")
        fixes.append(Fix("sudo modprobe nvidia_uvm && sudo nvidia-modprobe -u -c=0", "any"))
    mig = [g for g in snapshot.gpus if (g.mig_mode_current or "").lower() == "enabled" and not g.mig_devices]
    if mig:
        causes.append(f"MIG mode is enabled without MIG instances on GPU(s) {', '.join(str(g.index) for g in mig)}: "
                      "CUDA sees no device there")
        fixes.append(Fix("sudo nvidia-smi mig -cgi <profiles> -C", "any",
                         note="create instances, or disable MIG: sudo nvidia-smi -mig 0 (needs a GPU reset)"))
    if not causes:
        causes.append("no known cause found in the evidence; read the error above")
    # a "+cpu" version is PyTorch's own word that the wheel has no CUDA: it decides the differential
    cpu_wheel = (torch.torch_version or "").endswith("+cpu")
    yield Draft(
        Severity.CRITICAL,
        (f"PyTorch {torch.torch_version or ''} cannot use the GPUs (torch.cuda.is_available() is False): "
         if torch.cuda_available is False else "PyTorch fails before it can use the GPUs: ") + "; ".join(causes),
        evidence=tuple(evidence), fixes=tuple(dict.fromkeys(fixes)),
        labels={"decided": CPU_BUILD} if cpu_wheel else {},
    )


CPU_BUILD = "torch-cpu-build"  # causes.csv: the installed PyTorch is a CPU-only build


def _cpu_only_build(snapshot: Snapshot, version: str) -> Draft:
    """A CPU-only wheel where the evidence shows no GPU: it can never use one, but a CPU host may want it."""
    return Draft(
        Severity.WARNING, f"PyTorch {version} is a CPU-only build: it cannot use a GPU on any host",
        evidence=(Evidence(snapshot.sources.get("torch", TORCH_SOURCE), (f"PyTorch version: {version}",)),),
        labels={"decided": CPU_BUILD},
        fixes=(Fix(TORCH_REINSTALL, "any",
                   note="cu<XY> no newer than the CUDA Version nvidia-smi prints; nothing to do on a host "
                        "without an NVIDIA GPU"),))


# --------------------------------------------------------------------------- GH606


@check("GH606", "torch-arch-unsupported", "PyTorch has no kernels for a GPU's architecture", requires=("torch",))
def torch_arch_unsupported(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A GPU's compute capability (`torch.cuda.get_device_capability`) is not covered by the wheel's
    architecture list (`torch.cuda.get_arch_list()`): no `sm_XY` of the same major version with a minor
    version not above the GPU's, and no `compute_XY` PTX the driver could JIT-compile. Typical: a
    Blackwell GPU (sm_120, sm_100) with a wheel built before CUDA 12.8, or an old GPU dropped from a
    new wheel.

    Why it matters:
    `is_available()` is True and the GPU is listed, but every kernel launch fails with "CUDA error: no
    kernel image is available for execution on the device"; PyTorch only prints a warning at start.

    How to fix:
    Install a wheel whose architecture list has the GPU's sm_XY: the finding names the newest variant of
    PyTorch's index that has it (PyTorch's TORCH_CUDA_ARCH_LIST per CUDA variant, `knowledge/drivers.csv`) and
    that the driver runs: `pip install --force-reinstall torch torchvision torchaudio --index-url
    https://download.pytorch.org/whl/cu<XY>` (torch with its companions, as PyTorch's install commands do), with
    cu128 for sm_120, cu126 for sm_50, and `'torch<2.6'` from cu118 for sm_37. When no variant has it, build from
    source.

    Exceptions:
    A GPU covered only by PTX works, after a slow first call (GH609); it is not reported here.
    """
    torch = _torch(snapshot)
    if torch.installed is False:
        yield Skip("PyTorch is not installed for the python3 on PATH")
        return
    if not torch.cuda_available or not torch.devices:
        return
    if not torch.arch_list:
        yield Skip("PyTorch reported no architecture list")
        return
    bad = [d for d in torch.devices if d.capability and arch_support(d.capability, torch.arch_list) is None]
    bad += [d for d in torch.devices if d not in bad and "no kernel image" in (d.error or "")]
    if not bad:
        return
    yield Draft(
        Severity.CRITICAL,
        f"PyTorch {torch.torch_version or ''} has no kernels for "
        + ", ".join(f"cuda:{d.index} {d.name or ''} (sm_{(d.capability or '?').replace('.', '')})" for d in bad)
        + ": every CUDA operation there fails with 'no kernel image is available'",
        evidence=(Evidence(snapshot.sources.get("torch", TORCH_SOURCE), (
            f"torch.cuda.get_arch_list() = {' '.join(torch.arch_list)}",
            *(f"cuda:{d.index} {d.name}: capability {d.capability}" + (f", {d.error}" if d.error else "")
              for d in bad))),),
        fixes=arch_wheel_fixes([d.capability for d in bad if d.capability], driver_version(snapshot)[0]),
    )


WHEEL_INDEX = "https://download.pytorch.org/whl"
# "sm_120", "capability sm_86", "cuda capability 5.0", "compute capability 3.0": the GPU's compute capability as
# PyTorch's warnings and TensorFlow's log write it (linear: fixed words, bounded digit runs)
_CAPABILITY = lazy_re(r"\bcapability (?:sm_(\d{1,2}?)(\d)\b|(\d{1,2})\.(\d))")


def capabilities_named(lines: Iterator[str] | list[str]) -> list[str]:
    """The compute capabilities ("8.6") a GPU is named with in these lines ("... with CUDA capability sm_86 is not
    compatible ...", "Found GPU0 ... which is of cuda capability 5.0"), each once, in order."""
    found: list[str] = []
    for line in lines:
        for m in _CAPABILITY.finditer(line[:2000]):
            cc = f"{m[1]}.{m[2]}" if m[1] is not None else f"{m[3]}.{m[4]}"
            if cc not in found:
                found.append(cc)
    return found


def arch_wheel_fixes(capabilities: list[str], driver: str | None = None) -> tuple[Fix, ...]:
    """The PyTorch wheel to install for GPUs of these compute capabilities: the newest variant of PyTorch's index
    whose TORCH_CUDA_ARCH_LIST (knowledge/drivers.csv ``wheel`` rows, from PyTorch's build scripts) has kernels for
    each, and whose CUDA the driver runs when its version is known; bounded to the releases whose list is confirmed
    (``torch<2.6`` for cu118's sm_37). No capability known: the table's step. None fits: a step saying so."""
    from gpuhealth.knowledge import drivers

    caps = list(dict.fromkeys(c for c in capabilities if c))
    if not caps:
        return table_fixes("GH606")
    branch = drivers.branch_of(driver)
    runs = None
    if branch is not None:
        support = drivers.cuda_support(branch)
        runs = set(support.native) | set(support.minor_compat)
    wheels = drivers.wheels()
    fitting = [w for w in wheels if w.archs and all(w.runs_on(c) for c in caps) and (runs is None or w.cuda in runs)]
    sms = " ".join(f"sm_{c.replace('.', '')}" for c in caps)
    if not fitting:
        # a step in words: the evidence's values go in its note, never into the text a person may paste
        return (Fix("no PyTorch wheel variant has kernels for this GPU's compute capability: build PyTorch from "
                    "source with TORCH_CUDA_ARCH_LIST set to it, or use another GPU", "any",
                    note=f"compute capability {sms} (TORCH_CUDA_ARCH_LIST={';'.join(caps)})"
                         + (f"; no variant for it runs with driver {driver}" if runs is not None else "")),)
    wheel = fitting[-1]
    later = [w for w in wheels if w.archs and w.torch_below is None]
    bounded = wheel.torch_below and any(not any(w.runs_on(c) for w in later) for c in caps)
    spec = f"'torch<{wheel.torch_below}'" if bounded else "torch"
    need = next((t for t in drivers.toolkits() if t.version == wheel.cuda), None)
    note = (f"the newest PyTorch wheel variant whose arch list has kernels for {sms}"
            + (f" (releases before {wheel.torch_below})" if bounded else "")
            + (f"; CUDA {wheel.cuda} runs on driver {need.min_driver} or newer" if need and runs is None else "")
            + (f" ({family} or newer through minor-version compatibility)"
               if need and runs is None and (family := drivers.family_minimum(need.major)) else ""))
    command = f"pip install --force-reinstall {spec} torchvision torchaudio --index-url {WHEEL_INDEX}/{wheel.variant}"
    return (Fix(command, "any", note=note),)


# --------------------------------------------------------------------------- GH607


@check("GH607", "gpu-compute-wrong", "A GPU computes a wrong matmul", requires=("torch",))
def gpu_compute_wrong(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The PyTorch probe multiplies two fixed 256x256 float32 matrices (TF32 off) on every GPU and
    compares with the CPU: a maximum absolute difference above 0.01, a NaN/Inf, or an error raised by
    the operation is reported. Healthy GPUs differ from the CPU by about 1e-4 (summation order).

    Why it matters:
    A GPU that computes wrong numbers trains models to garbage without any error; one that raises on a
    plain matmul (illegal address, ECC error, launch failure) breaks every job scheduled on it.

    How to fix:
    Drain the GPU, read the kernel log for Xid errors (GH3xx), reset it (`sudo nvidia-smi --gpu-reset -i
    <index>`), run NVIDIA's field diagnostics (`dcgmi diag -r 3`) and RMA it if the error repeats.

    Exceptions:
    An error that says "no kernel image is available" is a wheel/architecture problem (GH606), not the
    GPU; "busy or unavailable" (exclusive compute mode with a job running) and "out of memory" (a job
    holds the memory) say the GPU is in use. None of these is reported here.
    """
    torch = _torch(snapshot)
    if torch.installed is False:
        yield Skip("PyTorch is not installed for the python3 on PATH")
        return
    if not torch.cuda_available or not torch.devices:
        return
    wrong: list[tuple[str, str]] = []
    for d in torch.devices:
        label = f"cuda:{d.index}"
        if d.matmul_nonfinite:
            wrong.append((label, f"{label} {d.name}: the result holds NaN/Inf"))
        elif d.matmul_max_error is not None and d.matmul_max_error > MATMUL_TOLERANCE:
            wrong.append((label, f"{label} {d.name}: max |GPU - CPU| = {d.matmul_max_error:g} "
                                 f"(tolerance {MATMUL_TOLERANCE:g})"))
        elif d.error and not any(m in d.error.lower() for m in NOT_THE_GPU):
            wrong.append((label, f"{label} {d.name}: {d.error}"))
    if not wrong:
        return
    yield Draft(
        Severity.CRITICAL, f"{len(wrong)} GPU(s) failed a matmul check against the CPU: "
                           + ", ".join(label for label, _ in wrong)
                           + " (cuda:N is PyTorch's numbering, after CUDA_VISIBLE_DEVICES)",
        evidence=(Evidence(snapshot.sources.get("torch", TORCH_SOURCE), tuple(line for _, line in wrong)),),
        fixes=(Fix("sudo dmesg | grep -E 'NVRM: Xid'", "any"),
               Fix("sudo nvidia-smi --gpu-reset -i <index>", "any", disruptive=True, note="drain the GPU first"),
               Fix("dcgmi diag -r 3", "any", note="NVIDIA's diagnostics; RMA the GPU if it fails")),
    )


# --------------------------------------------------------------------------- GH608


# CUDA 11 and 12 enumerate a single MIG device per process (NVIDIA MIG User Guide, "CUDA Device Enumeration")
_MIG_NAMED = lazy_re(r"\bMIG[- ]\d{1,2}g\.\d{1,3}gb\b|\bMIG-[0-9a-fA-F]{8}-", re.I)
# symptoms of a process seeing fewer GPUs than the host has (knowledge/symptoms.csv)
_FEWER_VISIBLE = frozenset({"torch-no-gpu", "framework-no-gpu", "gpu-missing", "container-no-gpu"})


def _mig_shown(snapshot: Snapshot) -> tuple[list[str], list[str]]:
    """Evidence that MIG splits the GPUs: what nvidia-smi says (GPUs with MIG mode Enabled, when several MIG
    devices can exist) and pasted lines that name a MIG device ("MIG 3g.40gb", "MIG-<uuid>")."""
    enabled = [g for g in snapshot.gpus if (g.mig_mode_current or "").strip().lower() == "enabled"
               or (g.mig_devices or 0) > 0]  # `nvidia-smi -L` lists MIG devices but not the mode
    several = len(enabled) > 1 or any((g.mig_devices or 0) > 1 for g in enabled)
    said = [f"GPU {g.index if g.index is not None else '?'}: "
            + (f"{g.mig_devices} MIG devices" if g.mig_devices else "MIG mode Enabled")
            for g in enabled] if several else []
    lines = [m.line for m in snapshot.messages or () if _MIG_NAMED.search(m.line[:4096])]
    return said, lines[:MAX_MIG_LINES]


MAX_MIG_LINES = 4


def _one_mig_selected(snapshot: Snapshot) -> bool:
    value = snapshot.env.get("CUDA_VISIBLE_DEVICES", "").strip()
    return value.startswith("MIG-") and "," not in value


@check("GH608", "cuda-visible-devices-hides-gpus", "CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES or MIG hides GPUs",
       reads=("env", "smi", "messages", "kernel_log"))
def cuda_visible_devices_hides_gpus(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    `CUDA_VISIBLE_DEVICES` or `NVIDIA_VISIBLE_DEVICES` in the environment gpuhealth ran in (or set in
    the evidence given: `export CUDA_VISIBLE_DEVICES=...`, `VAR=value command`, `os.environ[...]`,
    `os.environ.setdefault`/`os.putenv`, a Dockerfile's `ENV`, a compose file's `environment:`, a
    notebook's `%env`, a Kubernetes env entry, DeepSpeed's `--include host:2,3` or `--num_gpus N` and
    Accelerate's `--gpu_ids 1`, which their launchers turn into the variable; a value the program
    computes, `= args.gpu` or `f"{gpu}"`, is not read) is empty, `none`/`void`/`-1`, or lists an index
    beyond the host's GPU count, a UUID no GPU has, or a word that is neither: CUDA stops reading at
    that entry, so it and everything after it are hidden.
    Also: MIG splits the GPUs (MIG mode Enabled on several GPUs or with several MIG devices, or a
    MIG device named in an error), and a CUDA process enumerates only one MIG device. And: a program
    asks for a GPU index it cannot see (`cuda:3`, `torch.device("cuda", 3)`, `torch.cuda.set_device(3)`,
    `.cuda(3)`, `--device 3`, a launcher's last rank (`torchrun --nproc_per_node=4`: ranks take GPU
    LOCAL_RANK; judged only where a device was not found, since a script may not use it),
    `DataParallel(device_ids=[0, 1])`, `--gpu_ids 0,1`, a configuration's `gpu_ids: [0, 1]`, Lightning's
    `devices=[1]`, TensorFlow's `/gpu:3`, in its command line, code, configuration or traceback; the default
    of its own `--gpu`/`--gpu_ids`/`--device` option, judged only where a device was not found, since a
    command line may pass another) when the evidence shows how many it sees: the host's GPUs
    (`nvidia-smi -L`; where no program's output lists them, the count the reporter's words state, "I
    have only one GPU"), the entries of `CUDA_VISIBLE_DEVICES`, which CUDA renumbers from 0, the GPUs a
    Slurm job asks for (`#SBATCH --gres=gpu:1`, `--gpus=2`: Slurm sets the variable to them), or the
    framework's own refusal (XLA's "Invalid device ordinal value (1). Valid range is [0, 0]",
    TensorFlow's "'visible_device_list' listed an invalid GPU id" and "Could not satisfy explicit device
    specification '/device:GPU:1'" with the devices it has). Where the driver's list gives the host's
    count, the finding names the cause it decides: an index at or beyond it is beyond the host (whatever
    `CUDA_VISIBLE_DEVICES` keeps); an index the host has, under a
    `CUDA_VISIBLE_DEVICES` that keeps fewer, is the variable's renumbering.
    CUDA then fails with "invalid device ordinal" (cudaErrorInvalidDevice); that line alone, the GPU
    count unknown, is reported under this code with both causes open (an index beyond the GPUs present,
    or `CUDA_VISIBLE_DEVICES` keeping fewer). And: the program sees no GPU at all ("no CUDA-capable
    device is detected", PyTorch's "No CUDA GPUs are available") while `CUDA_VISIBLE_DEVICES` begins
    with an index N > 0, the GPU count unknown: CUDA stops at the first listed index that does not
    exist, and GPU 0 exists whenever any GPU does, so the list hides every GPU exactly when the host
    has N GPUs or fewer; `nvidia-smi -L` decides. The same for "invalid device ordinal" under such a
    list: every ordinal is invalid when it hides them all. In a terminal session the value judged is
    the one the failing command ran under, scoped as the shell scopes it: an `export` or `unset`
    holds for later commands, a `VAR=value command` prefix and a script the command runs (shown with
    `cat`) for that command only, a `source`d script for later ones, the program's own
    `os.environ[...]` last; a later run under another value does not change it. And: a program sees
    no GPU while the same evidence shows the driver serving them (`nvidia-smi -L` lists GPUs, or
    PyTorch printed `torch.cuda.is_available(): True` in another run) and the variable is not shown:
    PyTorch's "No CUDA GPUs are available" is a CUDA build counting zero devices, and what keeps a
    working driver's GPUs from one process is its environment, most often `CUDA_VISIBLE_DEVICES` set
    in the script that starts it. A CUDA build of PyTorch (`torch.version.cuda`, a `+cuXYZ` version)
    answering `torch.cuda.is_available()` False or `device_count()` 0 under a list that begins above
    GPU 0 is judged the same way. And: a program's Python line sets the variable after a line of the same
    program that initialised CUDA (`torch.cuda.is_available()`, `.cuda()`, `.to("cuda")`,
    `tf.config.list_physical_devices`, `jax.devices()`): the driver read the variable when CUDA started
    and PyTorch counts the devices once (c10/cuda/CUDAFunctions.cpp), so the assignment changes nothing
    for that process, which sees every GPU (or the value set before); a warning where the program then
    failed for want of a device or ran out of GPU memory, information otherwise (a launcher may set it
    for the processes it starts next). And: a Ray task or actor declared without a GPU request
    (`@ray.remote`, `num_gpus` unset or 0) while a program saw no GPU: Ray sets the variable for each
    task from its `num_gpus`, empty for one that asks for none.

    Severity: a device choice is about the job, not the node: its impact is the user's environment,
    so it never drains a node. On its own it is a WARNING at most, INFO where a driver failure in the
    same evidence leads; where it explains a critical symptom a program showed ("No devices were found"
    under NVIDIA_VISIBLE_DEVICES=none), it takes that symptom's severity (the severity rule,
    docs/architecture.md), and still drains nothing.

    Why it matters:
    Programs see fewer GPUs than the host has, or none ("no CUDA-capable device is detected",
    `torch.cuda.is_available()` False), while nvidia-smi, which ignores the variable, shows them all.
    Set in a profile or a service unit, it silently affects every job. `NVIDIA_VISIBLE_DEVICES`
    decides which GPUs the NVIDIA container runtime gives a container: `none`/`void` means none.
    With MIG (CUDA 11 and 12), a process sees a single MIG device whatever the number of MIG devices
    created or given to a container (NVIDIA MIG User Guide, "CUDA Device Enumeration"), so a program
    that asks for a second device fails (PyTorch: "device >= 0 && device < num_gpus INTERNAL ASSERT
    FAILED").

    How to fix:
    `unset CUDA_VISIBLE_DEVICES` (find where it is set: `grep -rs CUDA_VISIBLE_DEVICES /etc/profile.d
    /etc/environment ~/.bashrc`), or list valid indices (0 to count-1) or UUIDs from `nvidia-smi -L`.
    For containers, start them with `--gpus all` (or `NVIDIA_VISIBLE_DEVICES=all`). With MIG, run one
    process per MIG device, each with `CUDA_VISIBLE_DEVICES=MIG-<uuid>` from `nvidia-smi -L`, or
    disable MIG (`sudo nvidia-smi -i <index> -mig 0`) when one process must use whole GPUs.

    Exceptions:
    A valid subset (`CUDA_VISIBLE_DEVICES=0,1` on an 8-GPU host) is a deliberate choice and not
    reported; schedulers (Slurm, Kubernetes) set it per job. An index in pasted evidence is not judged
    when the evidence does not show how many GPUs the host has. MIG without a failing program is
    reported as information only (one MIG device per process is how MIG is used). Where a program's
    output shows the driver down (nvidia-smi cannot reach it, the module does not load), that cause
    leads (GH203, GH201): a list that may hide GPUs is then information, named for after the fix.
    """
    mig_said, mig_lines = _mig_shown(snapshot)
    mig = bool(mig_said or mig_lines) and not _one_mig_selected(snapshot)
    hidden = _hidden_from_process(snapshot)
    if snapshot.visible_set_late:
        yield _late_draft(snapshot, snapshot.visible_set_late[0])
    ray = _ray_draft(snapshot)
    if ray is not None:
        yield ray
    if snapshot.origin == "evidence" and not snapshot.env and not mig and not snapshot.devices_requested \
            and not hidden:
        if snapshot.visible_set_late or ray is not None:
            return
        yield Skip("the environment was not collected")
        return
    count = counted_gpus(snapshot)
    if not count and snapshot.origin != "evidence" and not mig:
        yield Skip("no NVIDIA GPU on this host")
        return
    problems = _visibility_problems(snapshot)
    if problems:
        yield Draft(
            Severity.WARNING, "; ".join(why for _, why in problems),
            evidence=(Evidence("environment", tuple(f"{n}={snapshot.env[n]}" for n, _ in problems)),
                      stated_count_evidence(snapshot) or Evidence("GPUs", (
                          f"{count} GPU(s) on this host" if count else "the GPU count is not in the evidence",))),
            fixes=tuple(slotted("unset {variable}", note="or list valid GPU indices or UUIDs (nvidia-smi -L)",
                                variable=n) for n, _ in problems),
            explains=("GH605", "GH610"),
        )
    elif beyond := _asked_beyond(snapshot, count):
        yield _asked_beyond_draft(snapshot, *beyond)
    elif mig:
        yield _mig_draft(snapshot, mig_said, mig_lines)
    elif not count and (first := _first_entry_hides_all(snapshot)):
        yield _first_entry_draft(snapshot, *first)
    elif hidden:
        yield _hidden_from_process_draft(*hidden)
    elif not count and any(snapshot.env.get(n, "").strip() for n in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")):
        # an index list cannot be judged without the GPU count: not checked, so not ruled out either
        shown = ", ".join(f"{n}={snapshot.env[n]}" for n in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
                          if n in snapshot.env)
        yield Skip(f"{shown} names GPUs, but the evidence does not show how many GPUs the host has "
                   "(paste nvidia-smi -L)")
    elif not count and snapshot.devices_requested:
        # the same: an index asked for is judged only against a GPU count, so without one it is not ruled out
        asked = snapshot.devices_requested[0]
        yield Skip(f"the program asks for GPU {asked.index} ({asked.text}), but the evidence does not show how many "
                   "GPUs it sees (paste nvidia-smi -L)")


# the catalogue's lines of a program out of GPU memory (knowledge/signatures.csv): on a shared host, what a program
# meets when it runs on a GPU it meant to leave to others
_OUT_OF_MEMORY = frozenset({"torch-cuda-out-of-memory", "cuda-memory-allocation"})


# the command that sets a visibility variable before the program starts, written whole: a command is never formatted
# from a value the evidence gave (tests/test_command_slots.py), and the variable's name is one of two
_SET_AT_START = {"CUDA_VISIBLE_DEVICES": "CUDA_VISIBLE_DEVICES=<indices> python3 <script.py>",
                 "NVIDIA_VISIBLE_DEVICES": "NVIDIA_VISIBLE_DEVICES=<indices> python3 <script.py>"}


def _late_draft(snapshot: Snapshot, late: LateVisibility) -> Draft:
    """A program sets a visibility variable after it initialised CUDA (evidence/facts.env_lines): the driver read the
    variable when CUDA started, so the assignment changes nothing for this process. A warning where the program then
    failed for want of a device or ran out of memory (it ran on GPUs it meant to leave), else information: a launcher
    may set the variable for the processes it starts next."""
    failed = [m for m in snapshot.messages or () if m.symptom in _FEWER_VISIBLE or m.symptom == DEVICE_NOT_VISIBLE
              or m.signature in _OUT_OF_MEMORY]
    earlier = snapshot.env.get(late.name)
    sees = (f"the value set before it ({late.name}={earlier})" if earlier is not None
            else "every GPU the host has, numbered as nvidia-smi numbers them")
    evidence = [Evidence("the program", (late.after, late.line))]
    if failed:
        evidence.append(Evidence(failed[0].source or "the program", (failed[0].line,)))
    return Draft(
        Severity.WARNING if failed else Severity.INFO,
        f"The program sets {late.name}={late.value} after a line that initialised CUDA ({late.after[:80]}): CUDA reads "
        f"the variable once, when it starts, so this assignment does not change the GPUs the program sees ({sees}); "
        "set it before CUDA starts (before importing torch is safest) or in the shell that starts the program",
        evidence=tuple(evidence),
        fixes=(Fix(_SET_AT_START.get(late.name, _SET_AT_START["CUDA_VISIBLE_DEVICES"]), "any",
                   note="set in the environment the program starts with, it holds from the first CUDA call; or move "
                        "the assignment above the line that initialised CUDA"),),
        explains=(("GH605", "GH610") + (("GH806",) if any(m.signature in _OUT_OF_MEMORY for m in failed) else ()))
        if failed else ())


def _ray_draft(snapshot: Snapshot) -> Draft | None:
    """A program's Ray task or actor asks for no GPU and a program then saw none: Ray runs such a task with
    CUDA_VISIBLE_DEVICES empty (evidence/facts._RAY_REMOTE). A CPU task is how Ray is often used: nothing without the
    failure."""
    failed = next((m for m in snapshot.messages or () if m.symptom in _FEWER_VISIBLE), None)
    if not snapshot.ray_without_gpus or failed is None or _driver_shown_down(snapshot):
        return None
    return Draft(
        Severity.WARNING,
        f"A Ray task or actor asks for no GPU ({snapshot.ray_without_gpus[0][:80]}) and the program sees none: "
        "Ray sets CUDA_VISIBLE_DEVICES for each task from its num_gpus, to an empty value when it asks for none, "
        "so CUDA code in it sees no GPU; declare it with @ray.remote(num_gpus=1) (or .options(num_gpus=1))",
        evidence=(Evidence("the program", snapshot.ray_without_gpus),
                  Evidence(failed.source or "the program", (failed.line,))),
        fixes=(Fix("python3 -c 'import ray; ray.init(); print(ray.cluster_resources().get(\"GPU\"))'", "any",
                   note="the GPUs Ray counts on this node; a task gets one only with num_gpus"),),
        explains=("GH605", "GH610"))


# Catalogue lines (knowledge/signatures.csv) whose documented meaning is that the process sees no GPU at all:
# cudaErrorNoDevice / CUDA_ERROR_NO_DEVICE ("no CUDA-capable device is detected", CUDA Runtime API, enum cudaError)
# and PyTorch's "No CUDA GPUs are available" (torch/cuda/__init__.py, raised when the device count is 0).
_SEES_NO_GPU = frozenset({"cuda-no-device", "torch-no-cuda-gpus-available"})
# cudaErrorInvalidDevice, "invalid device ordinal": the ordinal is none of the devices the process sees, which is
# every ordinal when CUDA_VISIBLE_DEVICES hides them all (CUDA Runtime API, enum cudaError)
_ORDINAL_INVALID = frozenset({"cuda-invalid-device",
                              # TensorFlow's and XLA's refusals of a device the process does not have: the same
                              # question (knowledge/signatures.csv, symptom device-not-visible)
                              "tf-explicit-gpu-not-registered", "xla-invalid-device-ordinal-value",
                              "tf-visible-device-list-invalid-id"})
# the symptoms of lines that show the NVIDIA driver down (knowledge/symptoms.csv): then no process sees a GPU
_DRIVER_DOWN = frozenset({"driver-unreachable", "module-refuses-to-load"})


def _driver_shown_down(snapshot: Snapshot) -> bool:
    """A program's line (not the reporter's words) shows the driver down: nvidia-smi cannot reach it, or the
    module does not load. That cause, not a variable, then keeps the GPUs from every process."""
    return any(m.symptom in _DRIVER_DOWN and not m.reported for m in snapshot.messages or ())


def _first_entry_hides_all(snapshot: Snapshot) -> tuple[int, str, MessageLine] | None:
    """CUDA_VISIBLE_DEVICES begins with GPU index N > 0 while the program says it sees no GPU at all, or that the
    device ordinal it asks for is invalid, the host's GPU count unknown. CUDA keeps only the listed indices and stops
    at the first that does not exist (CUDA C++ Programming Guide, "CUDA Environment Variables"), so it sees none
    exactly when the host has N GPUs or fewer; index 0 exists whenever any GPU does, so a list that begins with 0
    cannot hide them all."""
    value = snapshot.env.get("CUDA_VISIBLE_DEVICES", "").strip()
    first = value.split(",")[0].strip()
    if not first.isdigit() or int(first) == 0:
        return None
    line = next((m for m in snapshot.messages or () if m.signature in _SEES_NO_GPU), None)
    line = line or next((m for m in snapshot.messages or () if m.signature in _ORDINAL_INVALID), None)
    if line is None and _cuda_build(snapshot):  # a CUDA build answering is_available() False or device_count() 0
        line = next((m for m in snapshot.messages or () if m.signature is None and m.symptom == "torch-no-gpu"
                     and not m.reported), None)
    return (int(first), value, line) if line is not None else None


def _cuda_build(snapshot: Snapshot) -> bool:
    """The evidence shows PyTorch to be a CUDA build (torch.version.cuda, or a +cuXYZ version): it sees no GPU for
    another reason than being built without CUDA."""
    torch = snapshot.torch
    return torch is not None and bool(torch.torch_cuda_version) and not (torch.torch_version or "").endswith("+cpu")


def _first_entry_draft(snapshot: Snapshot, first: int, value: str, line: MessageLine) -> Draft:
    fails = ("the device ordinal it asks for is invalid" if line.signature in _ORDINAL_INVALID
             else "the program sees no GPU")
    host = ("a single-GPU host has only GPU 0" if first == 1
            else f"a host with {first} GPUs or fewer has no GPU {first} (indices start at 0)")
    message = (f"CUDA_VISIBLE_DEVICES={value} begins with GPU {first} and {fails}: {host}, and CUDA hides an index "
               "that does not exist and every entry after it; choose an index below the count nvidia-smi -L lists, "
               "or unset the variable")
    if line.signature in _ORDINAL_INVALID:  # the other way to an invalid ordinal under a list that hides nothing
        kept = len([e for e in value.split(",") if e.strip()])
        message += (f"; or the program asks for an index at or beyond the {kept} it keeps, which CUDA renumbers from 0 "
                    f"(GPU {first} is cuda:0 inside it)")
    down = _driver_shown_down(snapshot)
    if down:  # the driver is down for every process: that cause leads (GH203, GH201); the variable is checked after
        message = ("The driver is down in this evidence, which alone keeps every GPU from the program; once it is "
                   f"up, check CUDA_VISIBLE_DEVICES={value}: it begins with GPU {first}, which a host with {first} "
                   "GPU(s) or fewer does not have")
    return Draft(
        Severity.INFO if down else Severity.WARNING, message,
        evidence=(Evidence("environment", (f"CUDA_VISIBLE_DEVICES={value}",)),
                  Evidence(line.source or "the program", (line.line,)),
                  Evidence("GPUs", ("the GPU count is not in the evidence: nvidia-smi -L lists the valid indices",))),
        fixes=table_fixes("GH608"), explains=() if down else ("GH605", "GH610"))


# `bash run.sh`, `sh scripts/train.sh`, `./run.sh`, `source env.sh` as a session's prompt shows the command: the
# script that starts the program, where CUDA_VISIBLE_DEVICES is most often set. Only a plain path is taken (it is
# printed in a command a person may paste).
_LAUNCHER = lazy_re(r"(?:^|[$#>]\s)(?:\w{1,40}=\S{0,80}\s{1,4}){0,4}(?:(?:ba|z|da)?sh\s{1,4}|source\s{1,4}|\.\s{1,4})?"
                    r"(?P<path>(?:\.{0,2}/)?[\w.-]{1,80}(?:/[\w.-]{1,80}){0,8}\.sh)(?:\s|$)")


def _hidden_from_process(snapshot: Snapshot) -> tuple[Evidence, MessageLine] | None:
    """A program sees no GPU while the same evidence shows the driver working: the driver lists GPUs (nvidia-smi,
    NVML), or PyTorch saw a GPU in another run (``torch.cuda.is_available()`` True), and CUDA_VISIBLE_DEVICES is not
    shown. PyTorch raises "No CUDA GPUs are available" for a CUDA build that counts zero devices (a CPU build, a
    driver too old or a missing driver library print other messages), and the CUDA runtime's cudaErrorNoDevice
    says the installed driver detected none; what keeps the devices of a working driver from one process is its
    environment, CUDA_VISIBLE_DEVICES (CUDA C++ Programming Guide, "CUDA Environment Variables"). Not when the
    variable is shown (it is judged as shown), the driver is shown down, or MIG leaves a GPU without instances; nor on
    an NVSwitch system a program's output shows, where nvidia-smi lists the GPUs while CUDA cannot start on them until
    Fabric Manager has set the fabric up (NVIDIA Fabric Manager User Guide): the diagnosis ranks that first (GH210)."""
    if "CUDA_VISIBLE_DEVICES" in snapshot.env or _driver_shown_down(snapshot) or _on_nvswitch_board(snapshot):
        return None
    line = next((m for m in snapshot.messages or () if m.signature in _SEES_NO_GPU), None)
    if line is None or any((g.mig_mode_current or "").lower() == "enabled" and not g.mig_devices
                           for g in snapshot.gpus):
        return None
    works = _driver_works(snapshot)
    return (works, line) if works is not None else None


def _on_nvswitch_board(snapshot: Snapshot) -> bool:
    """Whether a program's output shows an NVSwitch system (not a person's words naming one)."""
    from gpuhealth.parsers.platform import nvswitch_platform

    platform = nvswitch_platform(snapshot)
    return platform is not None and not platform.reported


def _driver_works(snapshot: Snapshot) -> Evidence | None:
    """The evidence that the driver serves GPUs to a process: the driver's GPU list, or a PyTorch that saw one."""
    if snapshot.gpus and snapshot.reported_fact("smi") is None and snapshot.reported_fact("gpus") is None:
        source = snapshot.sources.get("smi") or snapshot.sources.get("nvml") or "nvidia-smi"
        return Evidence(source, (f"the driver lists {len(snapshot.gpus)} GPU(s)",))
    torch = snapshot.torch
    if torch is not None and (torch.cuda_available or (torch.device_count or 0) > 0) \
            and snapshot.reported_fact("torch") is None:
        return Evidence(snapshot.sources.get("torch", TORCH_SOURCE), ("torch.cuda.is_available() = True",))
    return None


def _hidden_from_process_draft(works: Evidence, line: MessageLine) -> Draft:
    fixes = table_fixes("GH608")
    launcher = _LAUNCHER.search((line.source or "").partition(": ")[2][:400])
    if launcher:
        fixes = (slotted("grep -n CUDA_VISIBLE_DEVICES {script:keyfile}", "any", script=launcher["path"],
                         note="the script that starts the program"), *fixes)
    seen = (works.lines[0] + " (nvidia-smi does not read CUDA_VISIBLE_DEVICES)"
            if works.lines[0].startswith("the driver") else "PyTorch saw a GPU elsewhere in the evidence")
    return Draft(
        Severity.WARNING,
        f"The program sees no GPU while {seen}: the GPUs are hidden from that process; most likely "
        "CUDA_VISIBLE_DEVICES, set for it (in the script that starts it, in its code or in the shell) and not shown "
        "here, hides them (an index the host does not have, or an empty value)",
        evidence=(works, Evidence(line.source or "the program", (line.line,))),
        fixes=fixes, explains=("GH605", "GH610"))


def _visible_count(snapshot: Snapshot, count: int) -> tuple[int, str | None]:
    """How many GPUs a CUDA program sees: the entries CUDA_VISIBLE_DEVICES keeps (renumbered from 0), else the host's
    GPUs; 0 when neither is known. The variable's value when it decides."""
    value = snapshot.env.get("CUDA_VISIBLE_DEVICES")
    if value is not None and value.strip():
        return len([e for e in value.split(",") if e.strip()]), value.strip()
    return count, None


def _asked_beyond(snapshot: Snapshot, count: int) -> tuple[DeviceRequest, int, str | None] | None:
    """The first GPU index a program asks for that is not among the GPUs it can see, with how many it sees."""
    # (a program that sees no GPU at all has another problem than the index it asks for: not this check's)
    said = next((r for r in snapshot.devices_requested if r.visible and r.index >= r.visible), None)
    if said is not None:  # the program's own message says how many GPUs it saw
        return said, said.visible or 0, snapshot.env.get("CUDA_VISIBLE_DEVICES")
    visible, value = _visible_count(snapshot, count)
    if value is None and snapshot.gpus_allocated is not None:
        visible = snapshot.gpus_allocated.count  # the scheduler gives the job these, whatever the host has
    if not visible:
        return None  # how many GPUs the program sees is not in the evidence: not judged
    # a launcher's ranks ask for GPU LOCAL_RANK only if the script uses it, and an option's default only if the command
    # line passes no other: judged where a device was not found (an ordinal refused, or no GPU seen for a default)
    failed = any(m.symptom == DEVICE_NOT_VISIBLE for m in snapshot.messages or ())
    unseen = failed or any(m.symptom in _FEWER_VISIBLE for m in snapshot.messages or ())
    beyond = next((r for r in snapshot.devices_requested if r.index >= visible and (
        failed or not r.ranks) and (unseen or not r.default)), None)
    return (beyond, visible, value) if beyond else None


def _asked_beyond_draft(snapshot: Snapshot, asked: DeviceRequest, visible: int, value: str | None) -> Draft:
    """A program asks for a GPU index it cannot see: CUDA answers "invalid device ordinal" (cudaErrorInvalidDevice),
    PyTorch "invalid device ordinal" or "Attempting to deserialize object on CUDA device N but ... device_count() is
    M". With CUDA_VISIBLE_DEVICES set, the program sees only the GPUs it keeps, numbered from 0."""
    allocated = snapshot.gpus_allocated if value is None and asked.visible is None else None
    seen = (f"CUDA_VISIBLE_DEVICES={value} keeps {visible} GPU(s), which CUDA renumbers from 0 inside the program "
            f"(0-{visible - 1})" if value is not None else
            f"{allocated.line}: the scheduler gives the job {visible} GPU(s) and sets CUDA_VISIBLE_DEVICES to them, "
            f"numbered 0-{visible - 1} inside it" if allocated is not None
            else f"{visible} GPU(s) on this host (0-{visible - 1})")
    evidence = [Evidence("the program", (asked.line or asked.text,))]
    if asked.visible is None or value is not None:
        source = ("environment" if value is not None else snapshot.sources.get("gpus_allocated", "job script")
                  if allocated is not None else snapshot.sources.get("smi", "GPUs"))
        evidence.append(Evidence(source, (seen,)))
        if asked.visible is None and (told := stated_count_evidence(snapshot)) is not None:
            evidence.append(told)
    valid = ("the only valid index is 0 (a single GPU is device 0)" if visible == 1
             else f"valid indices are 0-{visible - 1}" if visible else "it sees no GPU")
    if value is not None and visible:
        valid += f" (CUDA_VISIBLE_DEVICES={value} renumbers the GPUs it keeps from 0)"
    elif allocated is not None and visible:
        valid += f" (the job asks the scheduler for {visible}: {allocated.line[:80]})"
    remedy = ("; load it with torch.load(..., map_location=...) onto a GPU that exists"
              if asked.text.startswith("a checkpoint") else
              f"; start at most {visible} process(es) per node (--nproc_per_node={visible})"
              if asked.ranks and visible else "")
    decided = _index_cause(snapshot, asked, value if allocated is None else allocated.line)
    if decided and len(evidence) > 1:  # the count decides: it comes first (the differential quotes the first line)
        evidence[:2] = evidence[1::-1]
    return Draft(
        Severity.WARNING, f"The program asks for GPU {asked.index} ({asked.text}), but it can see {visible} GPU(s): "
        f"{valid}{remedy}", evidence=tuple(evidence),
        fixes=table_fixes("GH608", without=() if value is not None else ("unset CUDA_VISIBLE_DEVICES",)),
        explains=("GH605", "GH610"), labels={"decided": decided} if decided else {})


def _gpu_lost(snapshot: Snapshot) -> bool:
    """The kernel log shows a GPU fallen off the bus (Xid 79, GH302): the driver's list then lacks it, so the count
    it gives is not the host's."""
    log = snapshot.kernel_log
    return log is not None and any(g.kind == "fallen_off_bus" or (g.kind == "xid" and g.xid == 79)
                                   for g in log.tallies({"fallen_off_bus", "xid"}))


# the causes of "the program asked for a GPU it cannot see" (knowledge/causes.csv) that the GPU count decides
INDEX_BEYOND_HOST = "device-index-beyond-count"
VISIBLE_KEEPS_FEWER = "cuda-visible-devices-hides"
MORE_RANKS = "more-ranks-than-gpus"
DEVICE_NOT_VISIBLE = "device-not-visible"  # the symptom (knowledge/symptoms.csv) of an invalid device ordinal


def _index_cause(snapshot: Snapshot, asked: DeviceRequest, value: str | None) -> str | None:
    """Which cause the driver's own GPU list decides for an index the program cannot see: an index at or beyond the
    host's GPU count is beyond the host whatever CUDA_VISIBLE_DEVICES keeps (it can only keep fewer); an index the
    host has, under a CUDA_VISIBLE_DEVICES that keeps fewer, is the variable's renumbering. None without a program's
    list of the GPUs (a count from a framework's refusal or a person's words decides neither)."""
    host = gpu_count(snapshot)
    if not host or snapshot.reported_fact("smi") is not None or _gpu_lost(snapshot):
        return None
    if asked.index >= host:
        return MORE_RANKS if asked.ranks else INDEX_BEYOND_HOST
    return VISIBLE_KEEPS_FEWER if value is not None else None


def _mig_draft(snapshot: Snapshot, said: list[str], lines: list[str]) -> Draft:
    """MIG limits a process to one MIG device: a warning when a program failed for want of a device."""
    failing = any(m.symptom in _FEWER_VISIBLE for m in snapshot.messages or ())
    evidence = []
    if said:
        evidence.append(Evidence(snapshot.sources.get("smi", "nvidia-smi"), tuple(said)))
    if lines:
        evidence.append(Evidence("evidence given", tuple(lines)))
    message = ("MIG is in use: a CUDA process enumerates only one MIG device"
               + (", so the program sees fewer GPUs than it asks for" if failing else ""))
    return Draft(Severity.WARNING if failing else Severity.INFO, message, evidence=tuple(evidence),
                 fixes=(Fix("nvidia-smi -L", "any", note="lists the MIG devices and their MIG-<uuid>"),
                        Fix("CUDA_VISIBLE_DEVICES=MIG-<uuid> <program>", "any",
                            note="one process per MIG device")),
                 explains=("GH605", "GH610", "GH102") if failing else ())


# --------------------------------------------------------------------------- GH609


@check("GH609", "cuda-first-call-slow", "The first CUDA call takes more than 30 seconds", requires=("cuda",))
def cuda_first_call_slow(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The PyTorch probe's first CUDA call (`is_available()` up to the first tensor on `cuda:0`) took
    more than 30 seconds, or the probe did not answer within its 60-second limit.

    Why it matters:
    Every job pays this at start. Usual causes: persistence mode off on a many-GPU host (each GPU is
    initialised on first open, GH604), PTX being JIT-compiled because the wheel has no kernels for
    the GPU's architecture, or a GPU slow to answer (look for Xid errors).

    How to fix:
    Enable `nvidia-persistenced`; use a wheel that lists the GPU's `sm_XY` (GH606); set
    `CUDA_MODULE_LOADING=LAZY` (the default from CUDA 12.2); keep the JIT cache
    (`~/.nv/ComputeCache`) on a local disk.

    Exceptions:
    The first call after boot on a host without persistence is slower than later ones; the probe
    measures one call only.
    """
    state = _cuda(snapshot)
    torch = snapshot.torch
    if state.torch_probe_error and "timed out" in state.torch_probe_error:
        yield Draft(Severity.INFO, f"The PyTorch probe did not finish: {state.torch_probe_error}",
                    evidence=(Evidence(TORCH_SOURCE, (state.torch_probe_error,)),),
                    fixes=(Fix(ENABLE_PERSISTENCED, "any"),
                           Fix("time python3 -c 'import torch; torch.zeros(1, device=\"cuda\")'", "any")))
        return
    if torch is None or torch.installed is False:
        yield Skip(snapshot.unavailable.get("torch", "PyTorch is not installed for the python3 on PATH"))
        return
    seconds = torch.first_cuda_call_s
    if seconds is None or seconds <= SLOW_FIRST_CALL_S:
        return
    yield Draft(
        Severity.INFO, f"The first CUDA call took {seconds:g} s (over {SLOW_FIRST_CALL_S:g} s)",
        evidence=(Evidence(snapshot.sources.get("torch", TORCH_SOURCE),
                           (f"first CUDA call: {seconds:g} s on {torch.device_count or '?'} GPU(s)",)),),
        fixes=(Fix(ENABLE_PERSISTENCED, "any"), Fix("export CUDA_MODULE_LOADING=LAZY", "any")),
    )


# --------------------------------------------------------------------------- GH610

FRAMEWORK_NAMES = {"jax": "JAX", "cupy": "CuPy", "tensorflow": "TensorFlow"}
FRAMEWORK_FIXES = {
    "jax": Fix("pip install --upgrade 'jax[cuda12]'", "any",
               note="a CUDA-enabled jaxlib (jax-cuda12-plugin); 'jax[cuda13]' with driver 580 or newer"),
    "cupy": Fix("pip uninstall cupy && pip install cupy-cuda12x", "any",
                note="the wheel for the CUDA major version the driver supports (cupy-cuda11x for an 11.x driver)"),
    "tensorflow": Fix("pip install --upgrade 'tensorflow[and-cuda]'", "any",
                      note="brings the CUDA and cuDNN libraries TensorFlow was built with"),
}


def _major_of(version: str | None) -> int | None:
    key = version_key(version or "")
    return key[0] if key else None


def _framework_causes(snapshot: Snapshot, fw: FrameworkEnv) -> tuple[list[str], list[Fix]]:
    """Why ``fw`` sees no GPU, most specific first; the host-wide causes GH605 also names come last."""
    name = FRAMEWORK_NAMES.get(fw.name, fw.name)
    causes: list[str] = []
    fixes: list[Fix] = []
    driver, _ = driver_version(snapshot)
    driver_cuda = _driver_max_cuda(snapshot) or fw.driver_cuda_version
    if fw.cuda_build is False:
        what = {"jax": "a CPU-only jaxlib (no jax-cuda plugin installed)",
                "tensorflow": "a CPU-only TensorFlow build (tf.sysconfig: is_cuda_build False)"}.get(
            fw.name, f"a CPU-only {name} build")
        causes.append(what)
        fixes.append(FRAMEWORK_FIXES[fw.name])
    elif fw.cuda_version:
        minimum = family_minimum(fw.cuda_version) or requirement(fw.cuda_version)
        own_major, driver_major = _major_of(fw.cuda_version), _major_of(driver_cuda)
        too_old = (driver and minimum and version_key(driver) < version_key(minimum.driver_min)) or (
            own_major is not None and driver_major is not None and driver_major < own_major)
        if too_old:
            built = "uses CUDA runtime" if fw.name == "cupy" else "was built for CUDA"
            need = f"needs driver >= {minimum.driver_min}" if minimum else "needs a newer driver"
            supports = f"supports CUDA {driver_cuda}" if driver_cuda else "is older"
            causes.append(f"{name} {built} {fw.cuda_version}, newer than the driver ({driver or '?'}) "
                          f"{supports} ({need})")
            fixes.append(FRAMEWORK_FIXES[fw.name])
            if minimum:
                branch = minimum.driver_min.split(".")[0]
                fixes.extend(fixes_for(debian=["sudo apt-get install cuda-drivers-{branch}"],
                                       rhel=["sudo dnf install cuda-drivers-{branch}"], disruptive=True,
                                       branch=branch))
    errors = " ".join(x for x in (fw.gpu_error, *fw.messages) if x).lower()
    if not causes and fw.name == "tensorflow" and fw.cuda_build and ("dlopen" in errors or not errors):
        causes.append(f"TensorFlow was built with CUDA {fw.cuda_version or '?'}"
                      + (f" and cuDNN {fw.cudnn_version}" if fw.cudnn_version else "")
                      + " but could not load those libraries")
        fixes.append(FRAMEWORK_FIXES["tensorflow"])
    if not causes and ("insufficient" in errors or "too old" in errors or "newer than" in errors
                       or "is newer" in errors):
        causes.append(f"{name} reports a driver too old for its CUDA (see its message below)")
        fixes.append(FRAMEWORK_FIXES[fw.name])
    if module_loaded(snapshot) is False:
        causes.append("the nvidia kernel module is not loaded (GH201)")
        fixes.append(Fix("sudo modprobe nvidia", "any", note="see GH201"))
    for variable, why in _visibility_problems(snapshot):
        if variable == "CUDA_VISIBLE_DEVICES":
            causes.append(f"{why} (GH608)")
            fixes.append(Fix("unset CUDA_VISIBLE_DEVICES", "any", note="or list valid indices"))
    loaded = module_loaded(snapshot)
    if loaded and snapshot.module_listed("nvidia_uvm") is False:
        causes.append("nvidia_uvm is not loaded: CUDA cannot initialise without it (GH205)")
        fixes.append(Fix("sudo modprobe nvidia_uvm && sudo nvidia-modprobe -u -c=0", "any"))
    return causes, fixes


def _framework_evidence(snapshot: Snapshot, fw: FrameworkEnv) -> Evidence:
    name = FRAMEWORK_NAMES.get(fw.name, fw.name)
    built = ", ".join(x for x in (
        f"CUDA {fw.cuda_version}" if fw.cuda_version else None,
        f"cuDNN {fw.cudnn_version}" if fw.cudnn_version else None,
        "CPU-only build" if fw.cuda_build is False else None) if x)
    lines = [f"{name} {fw.version or '?'}" + (f" (jaxlib {fw.library_version})" if fw.library_version else "")
             + (f": {built}" if built else "")]
    if fw.backend:
        lines.append(f"jax.default_backend() = {fw.backend}")
    if fw.device_count is not None:
        lines.append(f"GPUs it sees: {fw.device_count}")
    if fw.driver_cuda_version:
        lines.append(f"the driver supports CUDA {fw.driver_cuda_version} (as {name} read it)")
    lines += [x for x in (fw.error, fw.gpu_error) if x]
    lines += list(fw.messages[-3:])
    return Evidence(snapshot.sources.get("torch", TORCH_SOURCE), tuple(lines))


@check("GH610", "framework-cannot-use-gpu", "JAX, CuPy or TensorFlow cannot use the GPUs or computes wrong",
       requires=("torch",))
def framework_cannot_use_gpu(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The framework probe (the same `python3` run as the PyTorch probe, one JSON line, the same
    60-second limit) imports JAX, CuPy and TensorFlow when `importlib.util.find_spec` finds them and
    asks each for its version, the CUDA it was built with (jaxlib's CUDA plugin or `+cudaXY` tag,
    CuPy's CUDA runtime, `tf.sysconfig.get_build_info()`), the GPUs it sees (`jax.devices("gpu")`,
    `cupy.cuda.runtime.getDeviceCount()`, `tf.config.list_physical_devices("GPU")`), and multiplies two
    16x16 integer matrices on every GPU it sees, compared with the exact answer computed on the CPU.
    A warning when an installed framework sees no GPU on a host that has GPUs, or fails to import;
    critical when a GPU returns a wrong or non-finite result. The finding says why when the evidence
    shows it: a CPU-only build (jaxlib without a CUDA plugin, tensorflow-cpu), a framework built for a
    CUDA newer than the driver supports (CuPy's `cudaErrorInsufficientDriver`), TensorFlow unable to
    load the CUDA/cuDNN libraries it was built with, the nvidia module or `nvidia_uvm` not loaded, or
    `CUDA_VISIBLE_DEVICES` hiding the GPUs; the framework's own CUDA messages are quoted.

    Why it matters:
    These frameworks fall back to the CPU silently (JAX prints one warning, TensorFlow only logs
    that it could not load libraries), so a job runs hundreds of times slower without failing. A
    GPU that returns wrong numbers trains models to garbage.

    How to fix:
    Install the GPU build for a CUDA version the driver supports: `pip install 'jax[cuda12]'`,
    `cupy-cuda12x` (or `cupy-cuda11x` on an 11.x driver), `pip install 'tensorflow[and-cuda]'`; or
    upgrade the driver. For a wrong result, treat the GPU as GH607 says (drain, Xid errors, reset,
    field diagnostics).

    Exceptions:
    Frameworks that are not installed are not judged (the probe reports `installed: false`); a
    framework the probe had no time left for (after 40 s) is skipped. Hosts without NVIDIA GPUs. The
    probe tells JAX and TensorFlow not to reserve GPU memory up front, so it does not starve running
    jobs; "out of memory" and "busy or unavailable" errors say the GPU is in use and are not wrong
    results. A PyTorch `collect_env` says nothing about other frameworks: skipped.
    """
    torch = _torch(snapshot)
    if not torch.frameworks:
        yield Skip("the probe reported no JAX, CuPy or TensorFlow state (a PyTorch collect_env, or an older probe)")
        return
    installed = [fw for fw in torch.frameworks if fw.installed]
    if not installed:
        yield Skip("none of JAX, CuPy, TensorFlow is installed for the python3 on PATH")
        return
    if not _gpus_exist(snapshot):
        return
    for fw in installed:
        name = FRAMEWORK_NAMES.get(fw.name, fw.name)
        if fw.skipped:
            yield Skip(f"{name}: {fw.skipped}")
            continue
        wrong: list[str] = []
        for d in fw.devices:
            label = f"GPU {d.index} {d.name or ''}".rstrip()
            if d.matmul_nonfinite:
                wrong.append(f"{label}: the result holds NaN/Inf")
            elif d.matmul_max_error is not None and d.matmul_max_error > MATMUL_TOLERANCE:
                wrong.append(f"{label}: max |GPU - CPU| = {d.matmul_max_error:g} (the exact answer is known)")
            elif d.error and not any(m in d.error.lower() for m in NOT_THE_GPU):
                wrong.append(f"{label}: {d.error.splitlines()[0][:300]}")
        if wrong:
            yield Draft(
                Severity.CRITICAL,
                f"{name} {fw.version or ''} got a wrong result on {len(wrong)} GPU(s) "
                "(an integer matmul compared with the CPU; GPU N is the framework's numbering)",
                evidence=(Evidence(snapshot.sources.get("torch", TORCH_SOURCE), tuple(wrong[:8])),
                          _framework_evidence(snapshot, fw)),
                fixes=(Fix("sudo dmesg | grep -E 'NVRM: Xid'", "any"),
                       Fix("sudo nvidia-smi --gpu-reset -i <index>", "any", disruptive=True,
                           note="drain the GPU first"),
                       Fix("dcgmi diag -r 3", "any", note="NVIDIA's diagnostics; RMA the GPU if it fails")),
            )
            continue
        if fw.error:
            yield Draft(
                Severity.WARNING, f"{name} is installed but fails: {fw.error.splitlines()[0][:300]}",
                evidence=(_framework_evidence(snapshot, fw),), fixes=(FRAMEWORK_FIXES[fw.name],),
            )
            continue
        if fw.device_count:
            continue
        causes, fixes = _framework_causes(snapshot, fw)
        if not causes:
            causes.append("no known cause found in the evidence; read its message below")
        yield Draft(
            Severity.WARNING,
            f"{name} {fw.version or ''} sees no GPU (the host has {gpu_count(snapshot) or 'some'}): "
            + "; ".join(causes),
            evidence=(_framework_evidence(snapshot, fw),),
            fixes=tuple(dict.fromkeys(fixes)),
        )


# --------------------------------------------------------------------------- GH611

GSP_FIRST_BRANCH = 515  # the oldest branch judged: GSP firmware versions in the corpus start at 515.105.01
GSP_ARCHITECTURES = ("Turing", "Ampere", "Ada", "Hopper", "Blackwell")  # GSP first present in Turing (facts 3.3)


def _gsp_gpus(snapshot: Snapshot) -> list[tuple[str, str, str]]:
    """(PCI address or GPU label, device ID, architecture) of every Turing-or-newer NVIDIA GPU."""
    from gpuhealth.knowledge.gpus import lookup

    found: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for device in snapshot.nvidia_pci_gpus:
        model = lookup(device.device_id)
        if model and model.architecture in GSP_ARCHITECTURES:
            found.append((device.address, model.device_id, model.architecture))
            seen.add(device.address)
    for gpu in snapshot.gpus:
        model = lookup(gpu.pci_device_id)
        where = gpu.pci_address or f"GPU {gpu.index}"
        if model and model.architecture in GSP_ARCHITECTURES and where not in seen:
            found.append((where, model.device_id, model.architecture))
            seen.add(where)
    return found


@check("GH611", "gsp-firmware-missing", "No GSP firmware for the loaded driver version", requires=("cuda",),
       reads=("kernel_log",))
def gsp_firmware_missing(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    The nvidia kernel module is loaded (`/proc/driver/nvidia/version`), or the kernel log shows an
    `RmInitAdapter failed` line; a GPU is Turing or newer (its PCI device ID looked up in
    `knowledge/gpus.csv`); and `/lib/firmware/nvidia/<loaded version>/` (also `/usr/lib/firmware`
    and `/lib/firmware/updates`) holds no `gsp*.bin` file. Critical with the open kernel module,
    which cannot run without GSP; a warning with the proprietary one. The versions that do have a
    firmware folder are listed: a folder for another version means the driver was upgraded or
    downgraded only in part.

    Why it matters:
    GSP firmware is used by default on every Turing and later GPU, and the firmware must be the
    module's exact version (NVIDIA's driver README, "GSP Firmware"). Without it the open
    module cannot initialise the GPU at all ("RmInitAdapter failed", nvidia-smi "No devices were
    found"); the proprietary module falls back to running without GSP only when its firmware policy
    allows, and loses GSP-only features. Missing files are typical of a distribution firmware package
    left out (Debian's `firmware-nvidia-gsp`), a module built from source without its firmware, or
    an initramfs built before the firmware was installed.

    How to fix:
    Reinstall the driver packages of the loaded version (they ship the firmware: Ubuntu's
    `nvidia-firmware-<branch>-<version>`, Debian's `firmware-nvidia-gsp`, the CUDA repository's
    driver packages, or the run-file installer), rebuild the initramfs so early loading finds the
    firmware, and reboot. Confirm with `ls /lib/firmware/nvidia/$(cat /sys/module/nvidia/version)/`
    and `nvidia-smi -q | grep -i 'GSP Firmware'`.

    Exceptions:
    GPUs older than Turing have no GSP. Drivers older than R515 are not judged (the corpus shows GSP
    firmware from 515 on; the file layout of older branches is not confirmed). A proprietary module
    with `NVreg_EnableGpuFirmware=0` in `/proc/driver/nvidia/params` does not use GSP: not reported.
    """
    state = _cuda(snapshot)
    rminit = [e for e in (snapshot.kernel_log.events if snapshot.kernel_log else ()) if e.kind == "rminit_failed"]
    loaded = module_loaded(snapshot)
    if not loaded and not rminit:
        yield Skip("the nvidia kernel module is not loaded" if loaded is False
                   else snapshot.unavailable.get("driver", "whether the nvidia module is loaded is unknown"))
        return
    gpus = _gsp_gpus(snapshot)
    if not gpus:
        if not snapshot.nvidia_pci_gpus and not snapshot.gpus:
            yield Skip("no NVIDIA GPU on this host")
        return  # only pre-Turing GPUs (or IDs the table does not know): no GSP
    version = state.gsp_driver_version or (snapshot.driver.version if snapshot.driver else None)
    if not version:
        yield Skip(snapshot.unavailable.get("cuda_gsp_firmware", "the loaded driver version is unknown"))
        return
    if (_major_of(version) or 0) < GSP_FIRST_BRANCH:
        return
    if state.gsp_firmware_files:
        return
    if "cuda_gsp_firmware" in snapshot.unavailable or state.gsp_driver_version is None:
        yield Skip(snapshot.unavailable.get("cuda_gsp_firmware", "/lib/firmware/nvidia was not read"))
        return
    flavour = snapshot.driver.flavour if snapshot.driver else None
    params = snapshot.host_env.driver_params if snapshot.host_env else {}
    if flavour != "open" and params.get("EnableGpuFirmware", "").strip() in ("0", "0x0", "0x00"):
        return  # GSP turned off on purpose (proprietary module)
    others = [v for v in state.gsp_firmware_versions if v != version]
    folder = state.gsp_firmware_dir or f"/lib/firmware/nvidia/{version}"
    where = (f"{folder} holds no gsp*.bin" if state.gsp_firmware_dir
             else f"there is no {folder} folder")
    if flavour == "open":
        severity, effect = Severity.CRITICAL, "the open kernel module cannot initialise these GPUs without it"
    else:
        severity, effect = Severity.WARNING, ("the proprietary module runs them without GSP at best, and fails "
                                              "to initialise them when its firmware policy requires GSP")
    # the headline first (what and where), then why it matters (issue 24: a headline is one short clause)
    message = f"No GSP firmware for driver {version} on {len(gpus)} Turing-or-newer GPU(s): {where}; {effect}"
    if others:
        message += f"; firmware exists for {', '.join(others[:4])} only: a partial driver upgrade or downgrade"
    banner = snapshot.driver.banner if snapshot.driver and snapshot.driver.banner else None
    listed = ", ".join(state.gsp_firmware_versions) or "none"
    evidence = [Evidence(PROC_VERSION, (banner or f"driver {version} ({flavour or 'flavour unknown'})",)),
                Evidence(folder, (f"gsp*.bin: none (folder {'present' if state.gsp_firmware_dir else 'absent'})",
                                  f"versions under /lib/firmware/nvidia: {listed}")),
                Evidence("knowledge/gpus.csv",
                         tuple(f"{addr}: device {dev} is {arch}" for addr, dev, arch in gpus[:8]))]
    if rminit and snapshot.kernel_log is not None:
        evidence.append(Evidence(snapshot.kernel_log.source, tuple(e.line for e in rminit[:3])))
    branch = version.split(".")[0]
    yield Draft(
        severity, message, evidence=tuple(evidence),
        fixes=(*fixes_for(debian=["sudo apt-get install --reinstall nvidia-firmware-{branch}-{version} "
                                  "|| sudo apt-get install --reinstall firmware-nvidia-gsp",
                                  "sudo update-initramfs -u"],
                          rhel=["sudo dnf reinstall 'nvidia-driver*' 'kmod-nvidia*'", "sudo dracut --force"],
                          branch=branch, version=version),
               slotted("ls /lib/firmware/nvidia/{version}/", note="should list gsp_ga10x.bin / gsp_tu10x.bin",
                       version=version),
               REBOOT),
        explains=("GH303",) if rminit else (),
    )
