"""Listings people paste (package lists, environment, libraries, device nodes, modules, services), each
mapped onto the same snapshot fields live collection fills, so the existing checks read them unchanged:

- packages (``dpkg -l``, ``apt list``, ``rpm -qa``, ``dnf list``) -> ``host_env.packages`` (GH202 package
  version against the module, GH509 routes and versions mixed), ``host_env.docker`` and
  ``nvidia_ctk_version`` when the listing shows them installed (GH802);
- ``pip list``/``pip freeze``/``conda list`` -> ``torch`` (a ``+cpu`` wheel or a ``_cpu_`` conda build:
  GH605) and ``cuda.conda_cudatoolkit`` (GH601, GH602);
- ``env``/``printenv``, ``echo $LD_LIBRARY_PATH``, ``ldconfig -p``, ``ls -l /usr/local/cuda*``, ``nvcc
  --version`` -> ``env`` and ``cuda`` (GH601-GH603, GH608);
- ``ls -l /dev/nvidia*`` -> ``device_nodes`` (GH207); ``modinfo nvidia`` -> ``install`` (GH506, GH507);
  ``cat /etc/modprobe.d/*``, ``grep -r ... /etc/modprobe.d``, ``modprobe -c`` -> ``install.modprobe_files`` (GH501,
  GH201: a file that blacklists nvidia);
- ``systemctl status`` / ``systemctl show`` / ``journalctl -u`` -> ``cuda.persistenced_*`` (GH604),
  ``cuda.fabricmanager_*`` (GH210), ``host_env.docker_active``; ``nvidia-container-cli info`` -> ``driver`` / ``nvml``;
  ``dcgmi diag``/``health`` -> ``dcgm`` (GH711).

Recognisers look at the head of the text only and never raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuhealth.evidence.registry import evidence_kind
from gpuhealth.lazyre import LazyPattern, guarded_re, has, lazy_re, starts
from gpuhealth.model import (
    CudaState,
    CudaToolkit,
    DcgmReport,
    DcgmResult,
    DriverInfo,
    HostEnvironment,
    InstalledKernel,
    InstallState,
    KernelEvent,
    KernelLog,
    ModprobeFile,
    NvidiaPackage,
    NvmlReport,
    OsInfo,
    ParseError,
    TorchEnv,
)
from gpuhealth.parsers.packages import (
    jockey_row,
    parse_apt_list,
    parse_conda_list,
    parse_dnf_list,
    parse_dpkg_list,
    parse_jockey_list,
    parse_pip_list,
    parse_rpm_qa,
    split_rpm_name,
)
from gpuhealth.parsers.system import logical_lines, modprobe_text_by_file, parse_modprobe_blacklist

# The parsers of environ, services and cuda are imported by the functions that use them: sniffing a piece
# of another kind (a kernel log) needs none of them.

_CAT = r"(?:cat|less|more|head|tail|grep\b.*?)\s+"
HEAD = 16384


def _lines(text: str, limit: int = 200) -> list[str]:
    """The first non-empty lines, stripped (the head only: recognisers must stay cheap)."""
    return [line.strip() for line in text[:HEAD].splitlines()[:limit] if line.strip()]


def _opens(text: str, pattern: re.Pattern[str], lines: int = 5) -> bool:
    """True when ``pattern`` is found in one of the first content lines: a pasted listing starts with its own
    header; the same words later in a longer paste belong to another kind (or to a session's block).

    The patterns recognisers use are guarded (``lazyre.guarded_re``): a piece of another kind is turned away
    by a substring or prefix test, without compiling the pattern."""
    return any(pattern.search(line) for line in _lines(text, lines))


def _share(lines: list[str], pattern: re.Pattern[str], at_least: float = 0.6) -> bool:
    hits = sum(1 for line in lines if pattern.match(line))
    return hits >= 1 and hits >= at_least * len(lines)


# --------------------------------------------------------------------------- packages

# Packages the host_env and the GH5xx/GH202 checks care about: the driver's, CUDA's and the toolkit's.
# cuda-compat-X-Y: the forward-compatibility libcuda's package (GH603)
_RELEVANT_PACKAGE = lazy_re(r"nvidia|^cuda-drivers|^cuda-compat-|^libcuda|^kmod-nvidia|^akmod-nvidia|"
                            r"^xorg-x11-drv-nvidia", re.IGNORECASE)
MAX_PACKAGES = 400


_DOCKER_PACKAGES = {"docker-ce", "docker.io", "docker-engine", "moby-engine", "docker"}


def _packages(found: tuple[NvidiaPackage, ...], source: str) -> dict[str, Any]:
    """The driver-related packages, and two positive facts a listing proves: Docker and the NVIDIA Container
    Toolkit are installed. Their absence proves nothing: the listing may have been filtered by grep."""
    kept = tuple(p for p in found if _RELEVANT_PACKAGE.search(p.name))[:MAX_PACKAGES]
    toolkit = next((p.version for p in found if p.name == "nvidia-container-toolkit" and p.version), None)
    docker = any(p.name in _DOCKER_PACKAGES for p in found)
    return {"host_env": HostEnvironment(packages=kept, package_source=source, docker=True if docker else None,
                                        nvidia_ctk_version=toolkit.split(":")[-1].split("-")[0] if toolkit else None)}


# Kernel packages (GH503): the image and the headers of each installed kernel. Debian and Ubuntu name the release in
# the package (linux-image-6.8.0-40-generic, linux-headers-6.8.0-40-generic: /lib/modules/<release>/build comes from
# the latter; linux-headers-6.8.0-40 alone is the flavour-less common part); Proxmox the same with pve-/proxmox-.
# RHEL-family packages carry it as their version: kernel (kernel-core from EL8) and kernel-devel, which fills
# /usr/src/kernels/<release> (kernel-headers is the C library's /usr/include, not the module build tree).
_DEB_KERNEL_IMAGE = lazy_re(r"^(?:linux-image-(?:unsigned-)?|(?:pve|proxmox)-kernel-)(?P<release>\d+\.\d+[\w.+~-]*?)"
                            r"(?:-signed|-unsigned)?$")
_DEB_KERNEL_HEADERS = lazy_re(r"^(?:linux-headers-|(?:pve|proxmox)-headers-)(?P<release>\d+\.\d+[\w.+~-]*)$")
_RPM_KERNEL_IMAGES = frozenset({"kernel", "kernel-core", "kernel-uek", "kernel-uek-core", "kernel-rt", "kernel-rt-core",
                                "kernel-ml", "kernel-lt"})
_RPM_KERNEL_DEVEL = frozenset({"kernel-devel", "kernel-uek-devel", "kernel-rt-devel", "kernel-ml-devel",
                               "kernel-lt-devel"})


def kernel_packages(found: tuple[NvidiaPackage, ...], source: str) -> dict[str, Any]:
    """The install overlay of a package listing's kernels: which releases have an image and which have headers.
    Empty when the listing shows no kernel package (a ``grep nvidia`` of it says nothing about kernels)."""
    images: list[str] = []
    headers: list[str] = []
    for package in found[:20000]:
        name = package.name
        if name.endswith(("-dbg", "-dbgsym")):
            continue  # debug symbols, not a kernel
        if package.manager == "rpm":
            if package.version and name in _RPM_KERNEL_IMAGES:
                images.append(package.version)
            elif package.version and name in _RPM_KERNEL_DEVEL:
                headers.append(package.version)
            continue
        image = _DEB_KERNEL_IMAGE.match(name)
        if image:
            images.append(image["release"])
        elif (header := _DEB_KERNEL_HEADERS.match(name)) is not None:
            headers.append(header["release"])
    if not images and not headers:
        return {}
    return {"install": InstallState(kernel_packages=tuple(dict.fromkeys(images))[:64],
                                    headers_packages=tuple(dict.fromkeys(headers))[:64],
                                    kernel_packages_source=source)}


def _listing(found: tuple[NvidiaPackage, ...], source: str) -> dict[str, Any]:
    """A system package listing's overlays: the driver packages (host_env) and the kernels (install)."""
    return {**_packages(found, source), **kernel_packages(found, source)}


# Output that is not a package listing may still name installed packages, one full rpm name per line (an installer
# or a helper script listing "existing driver packages"). A transaction's removals name packages that are going
# away: a piece that speaks of removing, erasing, upgrading or replacing proves nothing about what stays installed.
_TRANSACTION_WORDS = lazy_re(r"\b(?:remov\w*|eras\w*|upgrad\w*|downgrad\w*|obsolet\w*|replac\w*|cleanup|"
                                r"uninstall\w*)\b", re.I)
_RPM_ARCH_SUFFIX = (".x86_64", ".aarch64", ".noarch", ".i686", ".ppc64le")


def embedded_rpm_packages(lines: list[str], source: str) -> dict[str, Any]:
    """The host_env overlay for lines that are each one full rpm name (``name-version-release.arch``) of a driver
    package, inside output that is not a listing; empty when there are none or the piece is a transaction."""
    names = [line.strip() for line in lines[:2000] if line.strip().endswith(_RPM_ARCH_SUFFIX)
             and " " not in line.strip() and len(line.strip()) < 200]
    found = tuple(NvidiaPackage(split[0], split[1], "rpm") for name in names
                  if (split := split_rpm_name(name)) is not None)
    if not found or any(_TRANSACTION_WORDS.search(line) for line in lines[:2000]):
        return {}
    overlay = _packages(found, f"{source} (package names in the output)")
    return overlay if overlay["host_env"].packages else {}


def _looks_like_jockey(text: str) -> bool:
    lines = _lines(text)
    hits = sum(1 for line in lines if jockey_row(line) is not None)
    return hits >= 1 and hits >= 0.6 * len(lines)


@evidence_kind("jockey-list", commands=(r"jockey-text\b.*(?:\s-l\b|--list)",), priority=445,
               recognise=_looks_like_jockey)
def _jockey(text: str, source: str) -> dict[str, Any]:
    """Jockey shows a driver "Enabled" when its package is installed: an enabled NVIDIA handler
    (``xorg:nvidia_experimental_304``) is the package of that name (``nvidia-experimental-304``), version unknown."""
    enabled = tuple(NvidiaPackage(handler.rsplit(":", 1)[-1].replace("_", "-"), None, "jockey")
                    for handler, on, _ in parse_jockey_list(text) if on and "nvidia" in handler)
    return {"host_env": HostEnvironment(packages=enabled[:MAX_PACKAGES], package_source="jockey-text --list")}


_DPKG_STATES = ("ii", "hi", "rc", "un", "iU", "iF", "pn", "hF", "hU", "rH")
_DPKG_ROW = guarded_re(r"^(?:ii|hi|rc|un|iU|iF|pn|hF|hU|rH)\s+[a-z0-9][a-z0-9+._:-]*\s+\S+", may=starts(*_DPKG_STATES))
_DPKG_HEADER = guarded_re(r"^\|\|/ Name", may=starts("||/ Name"))


@evidence_kind("dpkg-list", commands=(r"dpkg\s+(?:-l|--list)\b", r"dpkg-query\s+-l\b"), priority=460,
               recognise=lambda t: _opens(t, _DPKG_HEADER) or _share(_lines(t), _DPKG_ROW))
def _dpkg(text: str, source: str) -> dict[str, Any]:
    return _listing(parse_dpkg_list(text), source)


_APT_NAME = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+._-")


def _may_be_apt_row(line: str) -> bool:
    """The text before the first "/" is a package name (what _APT_ROW's start allows)."""
    name, slash, _ = line.partition("/")
    return bool(slash and name) and name[0] not in "+._-" and set(name) <= _APT_NAME


_APT_ROW = guarded_re(r"^[a-z0-9][a-z0-9+._-]*/\S*\s+\S+\s+\S+(?:\s+\[[^\]]*\])?$", may=_may_be_apt_row)


@evidence_kind("apt-list", commands=(r"apt\s+list\b",), priority=455,
               recognise=lambda t: _share([x for x in _lines(t) if not x.startswith(("Listing", "WARNING"))],
                                          _APT_ROW))
def _apt(text: str, source: str) -> dict[str, Any]:
    return _listing(parse_apt_list(text), source)


def _looks_like_rpm_qa(text: str) -> bool:
    lines = _lines(text)
    hits = sum(1 for line in lines if " " not in line and split_rpm_name(line) is not None
               and line.rsplit(".", 1)[-1] in ("x86_64", "aarch64", "noarch", "i686", "ppc64le"))
    return hits >= 1 and hits >= 0.7 * len(lines)


@evidence_kind("rpm-qa", commands=(r"rpm\s+-q",), priority=450, recognise=_looks_like_rpm_qa)
def _rpm(text: str, source: str) -> dict[str, Any]:
    return _listing(parse_rpm_qa(text), source)


_DNF_ROW = guarded_re(r"^[A-Za-z0-9_+.-]+\.(?:x86_64|aarch64|noarch|i686)\s+\S+\s+@?\S+$",
                      may=has(".x86_64", ".aarch64", ".noarch", ".i686"))
_DNF_HEADER = guarded_re(r"^Installed [Pp]ackages", may=starts("Installed "))


@evidence_kind("dnf-list", commands=(r"(?:dnf|yum)\s+list\b",), priority=445,
               recognise=lambda t: _opens(t, _DNF_HEADER) or _share(_lines(t), _DNF_ROW))
def _dnf(text: str, source: str) -> dict[str, Any]:
    return _listing(parse_dnf_list(text), source)


# --------------------------------------------------------------------------- prose around a listing

# The package listings: tables of rows whose parsers skip every other line. A person's words pasted with one ("I ended
# up with a non working driver and this:") are skipped too, so the piece must not count as read in full: analyze names
# them as not read (GH002), and a clean listing beside them is then NO DIAGNOSIS, never HEALTHY.
PACKAGE_LISTINGS = frozenset({"dpkg-list", "apt-list", "rpm-qa", "dnf-list", "jockey-list", "pip-list", "pip-freeze",
                              "conda-list"})
# the package managers' own lines around their rows (notices, headers, plugin banners): output, not a person's words
_TOOL_LINE_STARTS = ("WARNING:", "DEPRECATION:", "[notice]", "Loaded plugins", "Last metadata", "Loading mirror",
                     "Listing...", "Repository ", "Updating Subscription", "This system is", "Desired=", "#", "|",
                     "+++", "Installed Packages", "Available Packages", "Installed packages", " * ")
_WORD_PUNCTUATION = ".,:;!?()\"'"
# English words that carry a sentence, not a value: two of them in a line of words make it a sentence
_FUNCTION_WORDS = frozenset((
    "i", "i'm", "i've", "my", "we", "our", "you", "it", "it's", "this", "that", "these", "there", "the", "a", "an",
    "and", "but", "or", "so", "if", "not", "no", "to", "of", "for", "with", "on", "in", "at", "by", "from", "is",
    "was", "are", "were", "be", "been", "have", "has", "had", "after", "before", "when", "then", "do", "does",
    "did", "don't", "doesn't", "didn't", "can", "can't", "cannot", "could", "would", "should", "any", "what", "how",
    "why", "still", "also", "up"))
MAX_PROSE_SCAN = 4000  # lines of one listing looked at


def _is_prose(raw: str, log_prefix: LazyPattern) -> bool:
    """Whether one line is a person's sentence: at least five words, most of them plain words, two of them words that
    only a sentence has ("the", "I", "not", "with" ...), and not a line of a tool's own."""
    line = raw.strip()[:1000]
    if not line or line.startswith(_TOOL_LINE_STARTS) or "  " in line:  # two blanks: a row's columns
        return False
    if jockey_row(line) or _DPKG_ROW.match(line) or _APT_ROW.match(line) or _DNF_ROW.match(line):
        return False  # a package row, however sentence-like ("... (Proprietary, Enabled, Not in use)")
    if log_prefix.match(line):
        return False  # a log record's own line (dmesg's "[  12.3]", syslog's "Apr 26 20:40:08 host", an ISO time)
    words = [w.strip(_WORD_PUNCTUATION).lower() for w in line.split()]
    if len(words) < 5:
        return False
    plain = sum(1 for w in words if w and w.replace("'", "").replace("-", "").replace("/", "").isalpha())
    function = sum(1 for w in words if w in _FUNCTION_WORDS)
    return plain >= 0.6 * len(words) and function >= 2


_MARKDOWN_LABEL = lazy_re(r"#{1,6}\s.{0,200}$|(?:\*\*|__)[^*_]{1,200}(?:\*\*|__):?$|(?:-{3,}|\*{3,}|_{3,})$")


def prose_lines(text: str, edges_only: bool = False, own: Callable[[str], bool] | None = None) -> list[str]:
    """The lines of a pasted output that are a person's sentences. A package listing's parser skips every line that is
    not a row, so a sentence anywhere in it counts. Other programs' outputs have sentence-like lines of their own in
    the middle ("Interrupt: pin A routed to IRQ 29" in lspci -vv, "Clang version: Could not collect" in collect_env),
    so with ``edges_only`` only the sentences above the output's first line and below its last are a person's; ``own``
    tells the output's own lines where its grammar knows them (a collect_env report ends on one of its fields)."""
    from gpuhealth.parsers.wrapped import LOG_PREFIX

    raw_lines = text.splitlines()[:MAX_PROSE_SCAN]

    def is_prose(line: str) -> bool:
        return _is_prose(line, LOG_PREFIX) and not (own and own(line))

    if not edges_only:
        return [line for raw in raw_lines if is_prose(line := raw.strip()[:1000])]
    # a markdown heading, bold label or rule ("**Description**", "### Root cause", "---") frames a post's sections: it
    # is no line of the output, so the sentences above it stay above the output. Only the edges are read: from the top
    # down to the output's first line, from the bottom up to its last (the lines between are the output's own).
    above: list[str] = []
    first = None  # the output's first line
    for index, raw in enumerate(raw_lines):  # (each line stripped as it is reached: most are never looked at)
        line = raw.strip()[:1000]
        if is_prose(line):
            above.append(line)
        elif line and not _MARKDOWN_LABEL.match(line):
            first = index
            break
    if first is None:
        return above  # no output line: every sentence counts
    below: list[str] = []
    for raw in reversed(raw_lines[first + 1:]):
        line = raw.strip()[:1000]
        if is_prose(line):
            below.append(line)
        elif line and not _MARKDOWN_LABEL.match(line):
            break  # the output's last line
    return [*above, *reversed(below)]


# --------------------------------------------------------------------------- Python packages

_TORCH_CUDA_SUFFIX = lazy_re(r"\+cu(?P<major>\d{2,3}?)(?P<minor>\d)$")
_CONDA_CUDA_BUILD = lazy_re(r"cuda(?P<version>\d+\.\d+)|(?:^|_)cuda(?P<major>1\d)(?P<minor>\d)_")
_CUDA_RUNTIME_PACKAGES = ("cudatoolkit", "cuda-toolkit", "cuda-runtime", "cuda-cudart")


def torch_from_version(version: str) -> TorchEnv:
    """What a pip version of torch says: ``2.1.0+cpu`` is a CPU-only wheel (CUDA can never be available),
    ``2.1.0+cu118`` a CUDA 11.8 wheel; a plain ``2.1.0`` says nothing about CUDA."""
    if version.endswith("+cpu") or "+cpu." in version:
        return TorchEnv(torch_version=version, installed=True, cuda_available=False)
    match = _TORCH_CUDA_SUFFIX.search(version)
    if match:
        return TorchEnv(torch_version=version, installed=True, torch_cuda_version=f"{match['major']}.{match['minor']}")
    return TorchEnv(torch_version=version or None, installed=True)


def _conda_cuda(match: re.Match[str]) -> str:
    """``py3.7_cuda10.1.243_cudnn7.6.3_0`` (pytorch channel) -> "10.1"; ``cuda120_py311h...`` -> "12.0"."""
    return match["version"] or f"{match['major']}.{match['minor']}"


def _python_packages(pairs: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    torch = next((version for name, version in pairs if name == "torch"), None)
    if torch is None:
        return {}
    # the compiled extensions listed beside it, so GH627 can say which versions disagree
    extensions = tuple((name, version) for name, version in pairs if name in TORCH_EXTENSIONS)
    return {"torch": replace(torch_from_version(torch), extensions=extensions[:MAX_EXTENSIONS])}


# pip names (normalised: lower case, "-") of compiled PyTorch extensions that must match the installed torch
TORCH_EXTENSIONS = frozenset({"torchvision", "torchaudio", "flash-attn", "xformers", "vllm", "apex", "mmcv",
                              "mmcv-full", "detectron2", "pytorch3d", "deepspeed", "torch-scatter", "torch-sparse"})
MAX_EXTENSIONS = 16


_PIP_LIST_HEADER = guarded_re(r"\s*Package\s+Version\s*(?:\S+\s*)?\n\s*-{3,}\s+-{3,}", may=has("Package"))


@evidence_kind("pip-list", commands=(r"(?:pip3?|python\S*\s+-m\s+pip)\s+list\b", r"uv\s+pip\s+list\b"), priority=440,
               recognise=lambda t: bool(_PIP_LIST_HEADER.match(t[:HEAD])))
def _pip_list(text: str, source: str) -> dict[str, Any]:
    return _python_packages(parse_pip_list(text))


_FREEZE_ROW = guarded_re(r"^(?:\[pip3?\]\s+)?[A-Za-z0-9][A-Za-z0-9._-]*(?:==|\s+@\s+)\S+$", may=has("==", "@"))
_CONDA_HEADER = guarded_re(r"^# packages in environment at|^#\s*Name\s+Version\s+Build\s+Channel", may=starts("#"))
_CONDA_ROW = guarded_re(r"^\[conda\]\s+\S+\s+\S+", may=starts("[conda]"))


@evidence_kind("pip-freeze", commands=(r"(?:pip3?|python\S*\s+-m\s+pip)\s+freeze\b", r"uv\s+pip\s+freeze\b"),
               priority=435, recognise=lambda t: _share(_lines(t), _FREEZE_ROW, 0.8))
def _pip_freeze(text: str, source: str) -> dict[str, Any]:
    return _python_packages(parse_pip_list(text))


@evidence_kind("conda-list", commands=(r"(?:conda|mamba|micromamba)\s+list\b",), priority=430,
               recognise=lambda t: _opens(t, _CONDA_HEADER) or _share(_lines(t), _CONDA_ROW, 0.8))
def _conda(text: str, source: str) -> dict[str, Any]:
    packages = parse_conda_list(text)
    found: dict[str, Any] = {}
    names = {name for name, *_ in packages}
    for name, version, build, _channel in packages:
        if name in ("pytorch", "pytorch-gpu", "pytorch-cpu", "pytorch-nightly"):
            cuda = _CONDA_CUDA_BUILD.search(build)
            cpu = "cpu" in build.split("_") or name == "pytorch-cpu" or "cpuonly" in names
            found["torch"] = TorchEnv(torch_version=version, installed=True,
                                      torch_cuda_version=_conda_cuda(cuda) if cuda and not cpu else None,
                                      cuda_available=False if cpu else None)
        elif name in _CUDA_RUNTIME_PACKAGES and "cuda" not in found:
            found["cuda"] = CudaState(conda_cudatoolkit=version)
    if not packages:
        raise ParseError("conda list without packages")
    return found


# --------------------------------------------------------------------------- environment and libraries

_ENV_ROW = lazy_re(r"^(?:declare -x |export )?[A-Za-z_][A-Za-z0-9_]*=")
_ENV_NAMES = guarded_re(r"^(?:declare -x |export )?(?:PATH|HOME|USER|SHELL|LD_LIBRARY_PATH|CUDA_[A-Z_]+|"
                        r"NVIDIA_[A-Z_]+|CONDA_[A-Z_]+|HOSTNAME|PWD|LANG)=", re.M,
                        may=has("PATH=", "HOME=", "USER=", "SHELL=", "CUDA_", "NVIDIA_", "CONDA_", "HOSTNAME=", "PWD=",
                                "LANG="))


@evidence_kind("env", commands=(r"(?:env|printenv|export\s+-p|declare\s+-x)\s*$", r"(?:env|printenv)\s*\|"),
               priority=420,
               recognise=lambda t: len(_ENV_NAMES.findall(t[:HEAD])) >= 2 and _share(_lines(t), _ENV_ROW, 0.7))
def _env(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.environ import parse_env

    variables = parse_env(text)
    found: dict[str, Any] = {"env": variables}
    if "LD_LIBRARY_PATH" in variables:
        found["cuda"] = CudaState(ld_library_path=tuple(p for p in variables["LD_LIBRARY_PATH"].split(":")))
    return found


def _looks_like_library_path(text: str) -> bool:
    lines = _lines(text, 3)
    if len(lines) != 1:
        return False
    from gpuhealth.parsers.environ import parse_path_list  # here: only a one-line piece can be a path list

    try:
        parts = [p for p in parse_path_list(lines[0]) if p]
    except ParseError:
        return False
    return bool(parts) and sum(1 for p in parts if "/lib" in p) * 2 > len(parts)


@evidence_kind("library-path", commands=(r"echo\s+['\"]?\$\{?LD_LIBRARY_PATH\b", r"printenv\s+LD_LIBRARY_PATH\b"),
               priority=415, recognise=_looks_like_library_path)
def _library_path(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.environ import parse_path_list

    return {"cuda": CudaState(ld_library_path=parse_path_list(text))}


_LDCONFIG_ROW = guarded_re(r"^lib\S*\s+\([^()]*\)\s+=>\s+/", may=lambda line: line.startswith("lib") and "=>" in line)
_LDCONFIG_HEADER = guarded_re(r"\s*\d+ libs? found in cache", may=has(" found in cache"))


_LDCONFIG_COMMAND = guarded_re(r"^(?:sudo\s+)?(?:/s?bin/)?ldconfig\s+(?:-p|--print-cache)\b", may=has("ldconfig"))


def _ldconfig_rows(text: str) -> list[str]:
    """The head's lines without a first line that is the command itself, pasted without its prompt
    (`` ldconfig -p | grep libcuda.so.1`` above its rows, NVIDIA/nvidia-container-toolkit#1679)."""
    lines = _lines(text)
    return lines[1:] if lines and _LDCONFIG_COMMAND.match(lines[0]) else lines


@evidence_kind("ldconfig", commands=(r"ldconfig\s+(?:-p|--print-cache)\b", r"/sbin/ldconfig\s+-p\b"), priority=410,
               recognise=lambda t: bool(_LDCONFIG_HEADER.match(t[:200]))
               or _share(_ldconfig_rows(t), _LDCONFIG_ROW, 0.7))
def _ldconfig(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.model import LdConfEntry
    from gpuhealth.parsers.cuda import libcuda_version, resolve_libcuda
    from gpuhealth.parsers.environ import parse_ldconfig_listing

    listing = parse_ldconfig_listing(text)
    libcuda = resolve_libcuda(listing.libraries)
    state = CudaState(
        libraries=listing.libraries,
        ld_so_conf=tuple(LdConfEntry("ldconfig -p (the loader's cache)", d) for d in listing.cuda_dirs),
        libcuda_path=libcuda.path if libcuda else None,
        libcuda_version=libcuda_version(libcuda.path) if libcuda else None)
    return {"cuda": state}


_LD_CONF_HEAD = guarded_re(r"^==> /etc/ld\.so\.conf", may=starts("==> /etc/ld.so.conf"))
_LD_CONF_GREP = guarded_re(r"^/etc/ld\.so\.conf(?:\.d/[^\s:]+)?:(?:\d+:)?\s*(?:/|include\s)",
                           may=starts("/etc/ld.so.conf"))
_LD_CONF_LINE = guarded_re(r"^(?:include\s+\S+|/[^\s=;|]{1,300})$", may=starts("include", "/"))
# the file a `cat` named (a glob or several files: the listing's own lines name theirs)
_LD_CONF_FILE = lazy_re(r"(/etc/ld\.so\.conf(?:\.d/[\w.+-]{1,200})?)(?=\s*$|\s*[|;&])")


def _looks_like_ld_so_conf(text: str) -> bool:
    """Loader configuration: ``head``'s file headers or ``grep -r``'s file prefixes, else only directories and
    ``include`` lines (a file list, `find`'s, holds .so files; a directory list names CUDA to matter here)."""
    lines = [x for x in _lines(text, 40) if not x.startswith("#")]
    if _opens(text, _LD_CONF_HEAD, 2) or _share(lines, _LD_CONF_GREP, 0.8):
        return True
    return bool(lines) and len(lines) <= 30 and all(_LD_CONF_LINE.match(x) and ".so" not in x.rsplit("/", 1)[-1]
                                                    for x in lines) \
        and (any("cuda" in x.lower() for x in lines) or any(x.startswith("include") for x in lines))


@evidence_kind("ld-so-conf", commands=(_CAT + r".*?/etc/ld\.so\.conf",), priority=398,
               recognise=_looks_like_ld_so_conf)
def _ld_so_conf(text: str, source: str) -> dict[str, Any]:
    """``cat /etc/ld.so.conf.d/*.conf`` and the like: the directories naming CUDA the loader is configured with
    (GH602), as live collection reads them from the files."""
    from gpuhealth.model import LdConfEntry
    from gpuhealth.parsers.cuda import parse_ld_so_conf_listing

    named = _LD_CONF_FILE.search(source.rsplit("$ ", 1)[-1]) if "$ " in source else None
    entries = parse_ld_so_conf_listing(text, named[1] if named else "ld.so.conf (pasted)")
    return {"cuda": CudaState(ld_so_conf=tuple(LdConfEntry(f, d) for f, d in entries))}


_LS_TYPES = tuple("-dlcbps")
_LS_ROW = guarded_re(r"^[-dlcbps][-rwxsStTl]{9}[.+@]?\s", may=starts(*_LS_TYPES))
_LS_DEV_ERROR = guarded_re(r"cannot access '/dev/nvidia", may=has("cannot access '/dev/nvidia"))
_LS_CUDA_ROW = guarded_re(r"^(?:[-dlcbps][-rwxsStTl]{9}|total \d|/usr/local)",
                          may=starts(*_LS_TYPES, "total ", "/usr/local"))


def _ls_names(text: str) -> list[str]:
    from gpuhealth.parsers.environ import parse_ls

    try:
        return [e.path.rsplit("/", 1)[-1] for e in parse_ls(text[:HEAD])]
    except ParseError:
        return []


@evidence_kind("ls-dev-nvidia", commands=(r"ls\b.*\s/dev/nv",), priority=405,
               recognise=lambda t: _opens(t, _LS_DEV_ERROR, 2)
               or (_share(_lines(t), _LS_ROW, 0.5) and sum(n.startswith("nvidia") for n in _ls_names(t)) >= 2
                   and any(line.startswith("c") for line in _lines(t))))
def _dev_nodes(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.environ import parse_ls

    entries = parse_ls(text)
    nodes = []
    for entry in entries:
        parent, _, name = entry.path.rpartition("/")
        if parent in ("/dev", "") and name.startswith("nvidia") and entry.kind in ("char", "dir", "link", ""):
            nodes.append(name)
    return {"device_nodes": tuple(dict.fromkeys(nodes))}


def _looks_like_cuda_ls(text: str) -> bool:
    if not _share(_lines(text), _LS_CUDA_ROW, 0.5):
        return False
    return any(re.match(r"cuda(?:-\d+(?:\.\d+)?)?$", n) for n in _ls_names(text))


@evidence_kind("ls-cuda", commands=(r"ls\b.*\s/usr/local(?:/cuda\S*)?/?\*?(?:\s|$)",), priority=400,
               recognise=_looks_like_cuda_ls)
def _cuda_dirs(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.cuda import cuda_version_in_path
    from gpuhealth.parsers.environ import parse_ls

    toolkits: dict[str, CudaToolkit] = {}
    default_link = None
    for entry in parse_ls(text):
        path = entry.path if entry.path.startswith("/") else f"/usr/local/{entry.path}"
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name == "cuda" and entry.kind == "link" and entry.target:
            target = entry.target.rstrip("/")
            default_link = target if target.startswith("/") else f"/usr/local/{target}"
        elif re.fullmatch(r"cuda-\d+\.\d+", name) and entry.kind in ("dir", ""):
            toolkits[path] = CudaToolkit(path, cuda_version_in_path(path), source)
    if not toolkits and default_link is None:
        raise ParseError("no /usr/local/cuda-X.Y directory and no /usr/local/cuda link in the listing")
    return {"cuda": CudaState(toolkits=tuple(toolkits.values()), default_link=default_link)}


_NVCC_HEADER = guarded_re(r"^nvcc: NVIDIA \(R\) Cuda compiler|^Cuda compilation tools, release",
                          may=starts("nvcc: NVIDIA (R) Cuda compiler", "Cuda compilation tools, release"))
_MODINFO_ERROR = guarded_re(r"^modinfo: ERROR: Module nvidia", may=starts("modinfo: ERROR: Module nvidia"))
_MODINFO_FILENAME = guarded_re(r"^filename:\s+\S*/nvidia\.ko", re.M, may=has("/nvidia.ko"))


@evidence_kind("nvcc-version", commands=(r"nvcc\s+(?:-V|--version)\b",), priority=395,
               recognise=lambda t: _opens(t, _NVCC_HEADER, 2))
def _nvcc(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.cuda import parse_nvcc_version

    release, version = parse_nvcc_version(text)
    return {"cuda": CudaState(nvcc_release=release, nvcc_version=version)}


# modinfo cut to its signature fields ("modinfo nvidia | grep sig"): kmod's names, every line one of them
_MODINFO_SIG_FIELD = guarded_re(r"^(?:signer|sig_key|sig_hashalgo|sig_id):\s", may=starts("sig"))


def _signature_fields(text: str) -> bool:
    lines = _lines(text, 6)
    return 0 < len(lines) <= 4 and any(line.startswith("signer:") for line in lines) and all(
        _MODINFO_SIG_FIELD.match(line) for line in lines)


@evidence_kind("modinfo-nvidia", commands=(r"modinfo\s+(?:-\S+\s+)*nvidia\b",), priority=390,
               recognise=lambda t: _opens(t, _MODINFO_ERROR, 2)
               or ("vermagic:" in t[:HEAD] and bool(_MODINFO_FILENAME.search(t[:HEAD]))) or _signature_fields(t))
def _modinfo(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.evidence.facts import module_key_lines
    from gpuhealth.parsers.environ import parse_modinfo_listing

    try:
        info = parse_modinfo_listing(text)
    except ParseError:
        signer = module_key_lines(text.splitlines(), source, "modinfo nvidia")  # cut to its signer: "| grep signer"
        if signer and signer["install"].module_signer is not None:
            return signer
        raise
    if not info.found:
        return {"install": InstallState(module_found=False)}
    found: dict[str, Any] = {"install": InstallState(
        module_found=True, module_file=info.filename, module_version=info.version, module_signer=info.signer)}
    return found


_UNAME = guarded_re(r"Linux \S+ \d+\.\d+\S* #", may=has("Linux "))


def _looks_like_uname(text: str) -> bool:
    lines = _lines(text, 3)
    return len(lines) == 1 and bool(_UNAME.match(lines[0]))


@evidence_kind("uname", commands=(r"uname\b",), priority=386, recognise=_looks_like_uname)
def _uname(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.environ import parse_uname

    release, arch = parse_uname(text)
    return {"os": OsInfo(kernel_release=release, architecture=arch), "install": InstallState(kernel_release=release)}


_MODULE_FILE = guarded_re(r"^/(?:usr/)?lib/modules/[^/\s]+/\S*nvidia", may=starts("/lib/modules/", "/usr/lib/modules/"))


@evidence_kind("module-files", commands=(r"(?:find|ls|locate)\b.*(?:/lib/modules|nvidia\.ko)",), priority=384,
               recognise=lambda t: _share(_lines(t), _MODULE_FILE, 0.8))
def _module_files(text: str, source: str) -> dict[str, Any]:
    """Which kernels have an nvidia.ko on disk (GH507); whether each is the running one is decided by the
    check against ``install.kernel_release`` (``uname``), not here."""
    from gpuhealth.parsers.environ import parse_module_files

    kernels = parse_module_files(text)
    return {"install": InstallState(kernels=tuple(InstalledKernel(r, path) for r, path in kernels.items()))}


_MODPROBE_ROW = guarded_re(r"^(?:\S+\.conf:(?:\d+:)?)?(?:blacklist|options|install|alias|softdep|remove)\s+\S+",
                           may=has("blacklist", "options", "install", "alias", "softdep", "remove"))


def _modprobe_rows(text: str) -> list[str]:
    """The head's directives as modprobe reads them: a line ending in a backslash continues on the next."""
    rows = (line.strip() for line in logical_lines(text[:HEAD])[:200])
    return [row for row in rows if row and not row.startswith("#")]


# A modprobe.d file a command names ("cat /etc/modprobe.d/supergfxd.conf"): the file a listing without names shows
_NAMED_CONF = lazy_re(r"(?<![\w.-])/(?:etc|lib|usr/lib|usr/local/lib|run)/modprobe\.d/[\w.@+-]{1,200}\.conf\b")


@evidence_kind("modprobe-d", commands=(_CAT + r"/(?:etc|lib|usr/lib|usr/local/lib|run)/modprobe\.d",
                                       r"grep\b.*modprobe\.d", r"modprobe\s+(?:-\S+\s+)*(?:-c|--showconfig)\b"),
               priority=385, recognise=lambda t: _share(_modprobe_rows(t), _MODPROBE_ROW, 0.7))
def _modprobe(text: str, source: str) -> dict[str, Any]:
    """modprobe.d text (a file's content, ``grep -r`` over the folders, ``modprobe -c``): one ``ModprobeFile`` per file
    the text names (grep's prefixes, head's banners), else the file the command names, else the paste itself. A file's
    quoted content is read as the machine's (its grammar is modprobe.d(5)'s, not a person's sentence)."""
    named = dict.fromkeys(_NAMED_CONF.findall(source[:2000]))
    files: list[ModprobeFile] = []
    error: ParseError | None = None
    for path, part in modprobe_text_by_file(text).items():
        try:
            blacklisted, options = parse_modprobe_blacklist(part)
        except ParseError as exc:
            error = error or exc
            continue
        where = path or (next(iter(named)) if len(named) == 1 else f"{source} (pasted)")
        files.append(ModprobeFile(path=where, blacklisted=blacklisted, nouveau_options=options.get("nouveau"),
                                  nvidia_options=options.get("nvidia")))
    if not files:
        raise error or ParseError("no modprobe.d directives (blacklist, install, options, alias ...)")
    blacklisted = tuple(dict.fromkeys(module for f in files for module in f.blacklisted))
    return {"install": InstallState(modprobe_files=tuple(files)), "modprobe_blacklisted": blacklisted}


# --------------------------------------------------------------------------- services

_UNIT_COMMAND = r"(?:nvidia-persistenced|nvidia-fabricmanager|docker)(?:\.service)?\b"


# NVIDIA's suspend units (driver README, Configuring Power Management Support): systemd runs them around a suspend
SLEEP_UNITS = ("nvidia-suspend", "nvidia-resume", "nvidia-hibernate", "nvidia-suspend-then-hibernate")


def _service_overlay(states: Any, source: str) -> dict[str, Any]:
    cuda: dict[str, Any] = {}
    found: dict[str, Any] = {}
    sleep = tuple((s.unit, s.active or "", s.enabled or "") for s in states if s.unit in SLEEP_UNITS)
    if sleep:
        found["host_env"] = HostEnvironment(sleep_units=sleep)
    for state in states:
        if state.unit == "nvidia-persistenced":
            cuda.update(persistenced_active=state.active, persistenced_enabled=state.enabled,
                        persistenced_errors=state.errors, persistenced_command=state.command,
                        persistenced_command_source=source if state.command else None)
        elif state.unit == "nvidia-fabricmanager":
            cuda.update(fabricmanager_active=state.active, fabricmanager_enabled=state.enabled,
                        fabricmanager_errors=state.errors)
        elif state.unit == "docker" and (state.active or state.enabled):
            installed = True if state.enabled not in (None, "not-found") else None  # the unit file exists
            found["host_env"] = HostEnvironment(docker_active=state.active, docker=installed, sleep_units=sleep)
    if cuda:
        found["cuda"] = CudaState(**{k: v for k, v in cuda.items() if v})
    if not found:
        raise ParseError("the listing is about no unit gpuhealth reads (nvidia-persistenced, "
                         "nvidia-fabricmanager, docker, nvidia-suspend/-resume/-hibernate)")
    return found


# systemctl's status block (systemd src/systemctl/systemctl-show.c, print_status_info): the bullet line
# "● name.service - Description", then "Loaded: ..." and "Active: <state> (<sub-state>)". People cut the Loaded: line
# (or paste only the bullet line and Active:): the bullet line with an Active: line in one of systemd's unit active
# states right under it is as sure as with Loaded: (a sentence "the service is active" has neither).
_SYSTEMCTL_HEADER = guarded_re(r"(?:\S\s+)?\S+\.service - [^\n]*\n\s+(?:Loaded: |Active: (?:active|inactive|failed|"
                               r"activating|deactivating|reloading|maintenance|refreshing)(?: \(| since |\s*$))",
                               re.M, may=lambda text: ".service - " in text and ("Loaded: " in text
                                                                                 or "Active: " in text))
_UNIT_NOT_FOUND = guarded_re(r"Unit (?:nvidia-persistenced|nvidia-fabricmanager|docker|nvidia-suspend|nvidia-resume|"
                             r"nvidia-hibernate)\S* could not be found",
                             may=has(" could not be found"))


@evidence_kind("systemctl-status", commands=(r"systemctl\s+(?:--\S+\s+)*status\b", r"service\s+\S+\s+status\b"),
               priority=380,
               recognise=lambda t: bool(_SYSTEMCTL_HEADER.match(t[:HEAD].lstrip())) or _opens(t, _UNIT_NOT_FOUND, 2))
def _systemctl(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.services import parse_systemctl_status

    return _service_overlay(parse_systemctl_status(text), source)


# `systemctl is-enabled UNIT...` (systemd src/systemctl/systemctl-is-enabled.c): one unit-file state per unit named, in
# order; a unit that does not exist is "not-found", or (through the bus) "Failed to get unit file state for U: ..."
# on stderr, after which systemctl stops.
_ENABLED_STATES = frozenset({"enabled", "enabled-runtime", "linked", "linked-runtime", "alias", "masked",
                             "masked-runtime", "static", "indirect", "disabled", "generated", "transient", "bad",
                             "not-found"})
_NO_UNIT_FILE = lazy_re(r"^Failed to get unit file state for (?P<unit>[A-Za-z0-9@_.:-]{1,200}?)(?:\.service)?: ")
SOURCE_COMMAND_CUT = 80  # analyze names a piece by its command's first 80 characters (analyze._block_name)
_IS_ENABLED_COMMAND = lazy_re(r"\bis-enabled\s+(?P<units>[^|;&>]{1,2000})")


def _enabled_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()[:64] if line.strip()]


def _looks_like_is_enabled(text: str) -> bool:
    lines = _enabled_lines(text[:HEAD])
    return 0 < len(lines) <= 32 and all(line in _ENABLED_STATES or _NO_UNIT_FILE.match(line) for line in lines)


@evidence_kind("systemctl-is-enabled", commands=(r"systemctl\s+(?:--\S+\s+)*is-enabled\b",), priority=370,
               recognise=_looks_like_is_enabled)
def _systemctl_is_enabled(text: str, source: str) -> dict[str, Any]:
    """``systemctl is-enabled UNIT...``: each unit's unit-file state, paired in order with the units the command names
    (a "Failed to get unit file state" line names its own unit). ParseError when the units are not known."""
    from gpuhealth.parsers.services import ServiceState

    command = source.rsplit("$ ", 1)[-1] if "$ " in source else ""
    named = _IS_ENABLED_COMMAND.search(command[:2000])
    units = [u.removesuffix(".service") for u in named["units"].split() if not u.startswith("-")] if named else []
    if len(command) >= SOURCE_COMMAND_CUT and units:
        units.pop()  # the piece's name holds the command's first 80 characters: its last unit may be cut short
    lines = _enabled_lines(text)
    missing = {m["unit"] for line in lines if (m := _NO_UNIT_FILE.match(line))}
    words = iter(line for line in lines if line in _ENABLED_STATES)
    states = [ServiceState(m["unit"], enabled="not-found") for line in lines if (m := _NO_UNIT_FILE.match(line))]
    for unit in units:
        word = None if unit in missing else next(words, None)
        if word is not None:
            states.append(ServiceState(unit, enabled=word))
    if not states:
        raise ParseError("systemctl is-enabled's states, but not the units they are about (the command is not shown)")
    return _service_overlay(states, source)


_SHOW_ROW = guarded_re(r"^[A-Z][A-Za-z]{1,63}=", may=lambda line: "=" in line[:65])
_SHOW_STATE = guarded_re(r"^(?:ActiveState|LoadState)=", re.M, may=has("ActiveState=", "LoadState="))
_SHOWN_UNIT = lazy_re(r"\b(nvidia-persistenced|nvidia-fabricmanager|docker)(?:\.service)?\b")


@evidence_kind("systemctl-show", commands=(r"systemctl\s+(?:--\S+\s+)*show\b",), priority=378,
               recognise=lambda t: bool(_SHOW_STATE.search(t[:HEAD])) and _share(_lines(t), _SHOW_ROW, 0.9))
def _systemctl_show(text: str, source: str) -> dict[str, Any]:
    """``systemctl show UNIT`` (or ``-p ActiveState -p LoadState ...``): the unit's state as the status listing gives
    it. The unit is its ``Id=`` line, else the one the command names; systemd answers for a unit that does not exist
    too (``LoadState=not-found``)."""
    from gpuhealth.parsers.services import ServiceState, exec_start_command, parse_systemctl_show

    shown = parse_systemctl_show(text)
    named = _SHOWN_UNIT.search(shown.get("Id") or shown.get("Names") or source.rsplit("$ ", 1)[-1])
    if named is None:
        raise ParseError("the listing is about no unit gpuhealth reads (nvidia-persistenced, "
                         "nvidia-fabricmanager, docker)")
    missing = shown.get("LoadState") == "not-found"
    state = ServiceState(named[1], active=shown.get("ActiveState") or None,
                         enabled="not-found" if missing else shown.get("UnitFileState") or None,
                         command=exec_start_command(shown.get("ExecStart", "")))
    return _service_overlay((state,), source)


_JOURNAL_ROW = guarded_re(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{1,2}月 \d{1,2} \d\d:\d\d:\d\d|"
                          r"\d{4}-\d\d-\d\dT\S+) \S+ (?:systemd\[1\]: .*(?:persistenced|fabricmanager|fabric manager|"
                          r"[Dd]ocker)|(?:nvidia-persistenced|nv-fabricmanager|nvidia-fabricmanager\S*|dockerd)"
                          r"(?:\[\d+\])?: )",
                          may=has("persistenced", "fabricmanager", "fabric manager", "ocker"))


@evidence_kind("service-journal", commands=(r"journalctl\b.*(?:-u|--unit)[ =]?" + _UNIT_COMMAND,), priority=375,
               recognise=lambda t: _share([x for x in _lines(t) if not x.startswith("-- ")], _JOURNAL_ROW, 0.5))
def _journal(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.services import parse_service_journal

    return _service_overlay(parse_service_journal(text), source)


def _looks_like_fabricmanager_log(text: str) -> bool:
    if "] [tid " not in text[:HEAD]:
        return False
    from gpuhealth.parsers.fabricmanager_log import looks_like_fabricmanager_log

    return looks_like_fabricmanager_log(_lines(text, 40))


@evidence_kind("fabricmanager-log", commands=(_CAT + r"\S*fabricmanager\S*\.log",), priority=376,
               recognise=_looks_like_fabricmanager_log)
def _fabricmanager_log(text: str, source: str) -> dict[str, Any]:
    """Fabric Manager's own log: a start-up whose last word is that it set the fabric up says the service ran (GH210
    passes), and the version it names is compared with the driver's (GH210); its error lines are read by the catalogue
    (the ``fm-*`` rows), so they are not the unit's errors here."""
    from gpuhealth.parsers.fabricmanager_log import parse_fabricmanager_log

    log = parse_fabricmanager_log(text)
    state = CudaState(fabricmanager_active="active" if log.configured else None, fabricmanager_version=log.version)
    return {"cuda": state} if log.configured or log.version else {}


# `ps aux` / `ps -ef` (or a grep of one): the nvidia-persistenced process and its command line (GH604).
_PS_HEADER = guarded_re(r"^(?:USER\s+PID\s+%CPU\s+%MEM\s|UID\s+PID\s+PPID\s+C\s+STIME\s)", may=starts("USER", "UID"))
_PS_ROW_START = lazy_re(r"^\S{1,32}\s+\d{1,10}\s+\d")
# the COMMAND column's first word: the 11th of a `ps aux` row, the 8th of a `ps -ef` row
_PS_COMMAND_WORD = (10, 7)


def _ps_row_runs_persistenced(line: str) -> bool:
    """A ps row whose program is nvidia-persistenced (not a grep for it): a cheap test of the head's lines."""
    if "nvidia-persistenced" not in line or not _PS_ROW_START.match(line):
        return False
    words = line.split(maxsplit=11)
    return any(len(words) > i and words[i].rsplit("/", 1)[-1] == "nvidia-persistenced" for i in _PS_COMMAND_WORD)


@evidence_kind("ps-listing", commands=(r"ps\b",), priority=355,
               recognise=lambda t: _opens(t, _PS_HEADER, 2) or any(_ps_row_runs_persistenced(x) for x in _lines(t)))
def _ps(text: str, source: str) -> dict[str, Any]:
    """A process listing shows the daemon running and the flags it was started with; one without the daemon says
    nothing gpuhealth reads (a filtered or container listing cannot show that it does not run)."""
    from gpuhealth.parsers.services import parse_ps_persistenced

    command = parse_ps_persistenced(text)[0]
    return {"cuda": CudaState(persistenced_active="active", persistenced_command=command,
                              persistenced_command_source=f"{source} (ps)")}


_NVC_DEBUG = guarded_re(r"^(?:[IWE]\d{4} \d|-- WARNING|$)",
                        may=lambda line: not line or line.startswith(("I", "W", "E", "-- WARNING")) or line[0] == "\n")


def _container_cli_first_line(text: str) -> str:
    """The first line of ``nvidia-container-cli -k -d /dev/tty info`` after its debug log lines."""
    return next((line for line in _lines(text, 400) if not _NVC_DEBUG.match(line)), "")


@evidence_kind("container-cli-info", commands=(r"nvidia-container-cli\b.*\binfo\b",), priority=370,
               recognise=lambda t: _container_cli_first_line(t).startswith(("NVRM version:", "nvidia-container-cli: "))
               and ("Device Index:" in t[:HEAD] or "nvidia-container-cli: " in t[:200]))
def _container_cli(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.services import parse_container_cli_info

    info = parse_container_cli_info(text)
    found: dict[str, Any] = {}
    if info.nvrm_version:
        found["driver"] = DriverInfo(version=info.nvrm_version)
    error = re.split(r'[\\"]', info.error or "", maxsplit=1)[0].strip()  # a docker error quotes it with escapes
    if "nvml error:" in error:
        # nvidia-container-cli talks to the driver through NVML: its "nvml error: X" is NVML's own message
        found["nvml"] = NvmlReport(ok=False, error=error.split("nvml error:", 1)[1].strip())
    elif "libnvidia-ml.so" in error and "load library failed:" in error:
        # NVML itself could not be loaded; a mount error naming the library ("file exists") is the image's fault, not
        # NVML's: the catalogue reads that line
        found["nvml"] = NvmlReport(ok=False, error=error.split("load library failed:", 1)[-1].strip())
    return found  # a Jetson prints "NVRM version: (null)": nothing to add, still a valid listing


_DCGMI_HEADER = guarded_re(r"^\|\s*(?:Diagnostic|GPU Memory|Deployment|Overall Health|Group \d|GPU ID: \d)[^|]*\||"
                           r"^Successfully ran diagnostic|^Health Monitor Report",
                           may=starts("|", "Successfully ran diagnostic", "Health Monitor Report"))
_DMON_HEADER = guarded_re(r"^#Entity\s+\S", may=starts("#Entity"))
_DMON_ROW = guarded_re(r"^\s*GPU\s+\d+\s+\S", re.M, may=has("GPU"))


@evidence_kind("dcgmi", commands=(r"dcgmi\s+(?:diag|health)\b",), priority=365,
               recognise=lambda t: _opens(t, _DCGMI_HEADER, 4)
               or (t.lstrip().startswith("{") and "Health Monitor Report" in t[:HEAD]))
def _dcgmi(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.services import parse_dcgmi_health_json, parse_dcgmi_table

    rows = parse_dcgmi_health_json(text) if text.lstrip().startswith("{") else parse_dcgmi_table(text)
    results = tuple(DcgmResult(r.name, r.result, r.detail) for r in rows)
    return {"dcgm": DcgmReport(results=results, source=source)}


@evidence_kind("dcgmi-dmon", commands=(r"dcgmi\s+dmon\b",), priority=360,
               recognise=lambda t: _opens(t, _DMON_HEADER, 2) and bool(_DMON_ROW.search(t[:HEAD])))
def _dcgmi_dmon(text: str, source: str) -> dict[str, Any]:
    """The XIDER column (field 230, the last Xid of each GPU) becomes Xid events for GH301; other fields are
    samples no check reads from a paste."""
    from gpuhealth.parsers.services import parse_dcgmi_dmon

    columns = parse_dcgmi_dmon(text)
    events = []
    for gpu, value in columns.get("XIDER", ()):
        if value.isdigit() and int(value) > 0:
            line = f"GPU {gpu}  XIDER {value}"
            events.append(KernelEvent(kind="xid", message=f"dcgmi dmon: GPU {gpu} last Xid {value}", line=line,
                                      xid=int(value), detail=f"GPU {gpu} (DCGM field 230)"))
    return {"kernel_log": KernelLog(source=source, format="plain", lines_scanned=len(columns.get("XIDER", ())),
                                    events=tuple(events))} if "XIDER" in columns else {}
