"""Version banners: the one line a program prints about its version, read wherever it is pasted.

An issue body mixes a person's sentences with lines copied from several programs, without the prompts that
ran them. Each line below names its program by its form alone, so it is read in any text, whatever the text
as a whole was taken for (analyze.py reads them only in pieces whose own kind did not fill the same field).
A line must be the whole line, in the program's form: a sentence that quotes a version ("I use CUDA 10.0") is
a person's words, read by parsers/prose.py, not here.

Each program, the line it prints, and where that line's form is defined:

- ``nvcc --version``: "Cuda compilation tools, release 10.0, V10.0.130". CUDA Installation Guide for Linux,
  "Verify the Installation" (https://docs.nvidia.com/cuda/cuda-installation-guide-linux/): the output of nvcc -V.
- ``cat /proc/driver/nvidia/version``: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  396.54  Tue Aug 14 ...",
  then "GCC version:  gcc version 7.3.0 (...)". NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia/nv-procfs.c,
  nv_procfs_read_version: ``seq_printf(s, "NVRM version: %s\\n", pNVRM_ID)`` and ``"GCC version:  %s\\n"``.
- ``nvidia-container-cli info``: "NVRM version:   535.104.05". NVIDIA/libnvidia-container, src/cli/info.c:
  ``printf("NVRM version: %s\\n", drv->nvrm_version)``.
- ``nvidia-smi``: its table's header row, "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version:
  12.2 |" (610 names them "KMD Version" and "CUDA UMD Version"), as the nvidia-smi documentation shows it
  (https://docs.nvidia.com/deploy/nvidia-smi/index.html); parsers/smi_table.py reads the same row in a table.
- ``nvidia-smi -q``: "Driver Version                            : 535.104.05" and "CUDA Version : 12.2", a key
  padded to the value column, " : ", the value (the same page, -q).
- ``cat /proc/version``: "Linux version 5.15.0-91-generic (buildd@lcy02) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04)
  11.4.0, GNU ld ...) #101-Ubuntu SMP ...". torvalds/linux, init/version.c, ``linux_proc_banner``:
  ``"%s version %s (" LINUX_COMPILE_BY "@" LINUX_COMPILE_HOST ") (" LINUX_COMPILER ") %s\\n"``.
- ``uname -a``: "Linux gpu01 5.15.0-91-generic #101-Ubuntu SMP ... x86_64 x86_64 x86_64 GNU/Linux". GNU
  coreutils, uname(1): kernel name, node name, release, version, machine, processor, hardware platform (the last
  two left out when unknown), operating system.
- ``gcc --version``: "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0". gcc/gcc.cc, print_version: ``"%s %s%s\\n"``
  of the program's name, "(PKGVERSION)" and the version (https://gcc.gnu.org/onlinedocs/gcc/Overall-Options.html,
  --version).
- ``pip list``: "torch                    2.1.0+cu121", its "Package Version [Location]" columns
  (https://pip.pypa.io/en/stable/cli/pip_list/); pip freeze's "torch==1.13.1" as collect_env lists it after
  "[pip3] " (torch/utils/collect_env.py, get_pip_packages).
- PyTorch's ``collect_env``: "PyTorch version: 2.1.0+cu121", "Is CUDA available: False", "CUDA used to build
  PyTorch: 12.1". pytorch/pytorch, torch/utils/collect_env.py, ``env_info_fmt``.
- A check script's ``print("torch.cuda.is_available():", torch.cuda.is_available())``: the expression, a ":", "="
  or "->", and the bool Python prints ("torch.cuda.is_available(): True"). torch/cuda/__init__.py, is_available():
  True when PyTorch's CUDA build counts at least one device in that process.

``lspci -k``'s "Kernel driver in use: nvidia" is not read here: without the device line above it, it names no
device (the lspci reader takes it with that line).
"""

from __future__ import annotations

from re import Pattern

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import ParseError
from gpuhealth.records import record

__all__ = ["Banner", "read_banners"]

MAX_LINE = 400  # a banner is short (a /proc/version line is about 200 characters); longer lines are not banners
MAX_BANNERS = 64

_DRIVER = r"\d{3}\.\d{1,3}(?:\.\d{1,3})?"  # 396.54, 535.104.05
_CUDA = r"\d{1,2}\.\d{1,2}"
_NVCC = lazy_re(r"Cuda compilation tools, release (?P<release>" + _CUDA + r")"
                r"(?:, V(?P<version>\d{1,2}(?:\.\d{1,4}){1,3}))?")
_NVRM_ID = lazy_re(r"NVRM version:\s{1,40}NVIDIA UNIX .{1,300}")
_NVRM_CLI = lazy_re(r"NVRM version:\s{1,40}(?P<version>" + _DRIVER + ")")
_SMI_HEADER = lazy_re(r"NVIDIA-SMI \S{1,40} {1,80}(?:Driver|KMD) Version: (?P<driver>" + _DRIVER + r")"
                      r"(?: {1,80}CUDA (?:UMD )?Version: (?P<cuda>" + _CUDA + r"|N/A))?")
_SMI_QUERY = lazy_re(r"(?P<key>Driver|KMD|CUDA|CUDA UMD) Version\s{1,80}:\s{1,4}(?P<value>\S{1,40})")
_DRIVER_VERSION = lazy_re(_DRIVER)
_CUDA_VERSION = lazy_re(_CUDA)
_PROC_VERSION = lazy_re(r"Linux version (?P<release>\d+\.\d+[\w.+~-]{0,100}) \(.{1,300}\) #\S")
# uname -a leaves out the processor and the hardware platform when unknown (Arch Linux: "... x86_64 GNU/Linux")
_UNAME = lazy_re(r"Linux \S{1,100} (?P<release>\d+\.\d+[\w.+~-]{0,100}) #\S.{0,300} "
                 r"(?P<arch>x86_64|aarch64|ppc64le|s390x|i686|armv7l)(?: \S{1,20} \S{1,20})? GNU/Linux")
# "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0", "x86_64-linux-gnu-gcc-12 (Debian 12.2.0-14) 12.2.0",
# "cc (GCC) 11.4.1 20230605 (Red Hat 11.4.1-2)": the name, its package in parentheses, the version, a date, a note
_GCC = lazy_re(r"(?:[\w.]{1,40}-){0,6}(?:gcc|cc)(?:-\d{1,3}(?:\.\d{1,3}){0,2})? \((?P<package>[^()]{1,200})\) "
               r"(?P<version>\d{1,3}\.\d{1,3}(?:\.\d{1,3})?)(?: \d{8})?(?: \([^()]{1,200}\))?(?: \(prerelease\))?")
# pip list's row (the location column of an editable or `-v` listing; conda list's row for a pip package), and pip
# freeze's line as collect_env prints it ("[pip3] torch==1.13.1"; a bare "torch==..." may be a requirements file's pin)
_TORCH_VERSION_FORM = (r"(?P<version>\d{1,3}\.\d{1,3}(?:\.\d{1,3})?(?:(?:a|b|rc|\.dev|\.post)\d{1,12})*"
                       r"(?:\+[\w.]{1,40})?)")
_TORCH_ROW = lazy_re(r"torch(?P<gap> {1,80})" + _TORCH_VERSION_FORM
                     + r"(?: {1,80}/\S{1,300}(?: {1,80}\w{1,20})?| {1,80}pypi_0 {1,80}pypi)?")
_TORCH_FREEZE = lazy_re(r"\[pip3?\] torch==" + _TORCH_VERSION_FORM)
_COLLECT_ENV = lazy_re(r"(?P<key>PyTorch version|Is CUDA available|CUDA used to build PyTorch): (?P<value>\S{1,60})")
_TORCH_VERSION = lazy_re(r"\d{1,3}\.\d{1,3}")  # "2.1.0+cu121"
_COLLECT_ENV_KEYS = {"PyTorch version": "torch", "Is CUDA available": "available",
                     "CUDA used to build PyTorch": "torch_cuda"}
_UNKNOWN = ("N/A", "None", "none")
_IS_AVAILABLE = lazy_re(r"torch\.cuda\.is_available\(\)\s{0,4}(?::|=|->)\s{0,4}(?P<value>True|False)")


@record
class Banner:
    """One program's version line: which program prints it, the line, where it is, and what it says."""

    program: str  # the command that prints it: "nvcc --version"
    line: str  # the line, stripped
    index: int  # its line number in the text read (0-based)
    values: tuple[tuple[str, str], ...]  # ("release", "10.0"), ("version", "10.0.130")

    def value(self, key: str) -> str | None:
        return next((v for k, v in self.values if k == key), None)


def read_banners(text: str) -> tuple[Banner, ...]:
    """Every version banner in ``text`` (see the module's table), in order; () when it holds none.

    ``nvidia-smi -q``'s "CUDA Version : X" is read only beside its "Driver Version : Y" line (``nvidia-smi -q``
    prints both; a lone "CUDA Version" may be a toolkit a person names), and the "GCC version:" line of
    /proc/driver/nvidia/version only right after its "NVRM version:" line."""
    if not isinstance(text, str):
        raise ParseError("banner text must be text")
    lines = text.split("\n")
    found: list[Banner] = []
    query: list[Banner] = []
    for index, raw in enumerate(lines):
        line = raw.strip()
        if not line or len(line) > MAX_LINE:
            continue
        banner = _banner(line, index, lines)
        if banner is None:
            continue
        (query if banner.program == "nvidia-smi -q" else found).append(banner)
        if len(found) + len(query) >= MAX_BANNERS:
            break
    if any(b.value("driver") for b in query):
        found.extend(query)
    return tuple(sorted(found, key=lambda b: b.index))


def _banner(line: str, index: int, lines: list[str]) -> Banner | None:
    """The banner ``line`` is, or None; each form is tried only when the line starts as that form does."""
    first = line[0]
    if first == "C" and line.startswith("Cuda compilation tools"):
        return _match("nvcc --version", _NVCC, line, index, ("release", "version"))
    if first == "N" and line.startswith("NVRM version:"):
        return _nvrm(line, index, lines)
    if "NVIDIA-SMI " in line[:16]:
        return _match("nvidia-smi", _SMI_HEADER, line.strip("|").strip(), index, ("driver", "cuda"))
    if " Version" in line[:17] and line.startswith(("Driver", "KMD", "CUDA")):
        return _smi_query(line, index)
    if first == "L" and line.startswith("Linux "):
        return _linux(line, index)
    if first in "PIC" and line.startswith(tuple(_COLLECT_ENV_KEYS)):
        return _collect_env(line, index)
    if line.startswith("torch.cuda.is_available()"):
        return _match("torch.cuda.is_available()", _IS_AVAILABLE, line, index, ("value",))
    if line.startswith("torch"):
        return _pip_row(line, index)
    if line.startswith("[pip"):
        return _match("pip freeze", _TORCH_FREEZE, line, index, ("version",))
    if "cc" in line[:60] and "(" in line:
        return _match("gcc --version", _GCC, line, index, ("version", "package"), banner=True)
    return None


def _match(program: str, pattern: Pattern[str], line: str, index: int, keys: tuple[str, ...],
           banner: bool = False) -> Banner | None:
    match = pattern.fullmatch(line)
    if match is None:
        return None
    values = tuple((key, match[key]) for key in keys if match[key] and match[key] not in _UNKNOWN)
    return Banner(program, line, index, values + ((("banner", line),) if banner else ()))


def _pip_row(line: str, index: int) -> Banner | None:
    """pip list pads its name column to the longest name, so a real row has a wide gap; one space ("torch 2.1.0",
    as a rendered page shows it) is read only with a wheel's local version (+cu121, +cpu), which people copy, not
    type."""
    match = _TORCH_ROW.fullmatch(line)
    if match is None or (match["gap"] == " " and "+" not in match["version"]):
        return None
    return Banner("pip list", line, index, (("version", match["version"]),))


def _nvrm(line: str, index: int, lines: list[str]) -> Banner | None:
    """``/proc/driver/nvidia/version``'s first line (the compiler from its second), or ``nvidia-container-cli
    info``'s "NVRM version: 535.104.05"."""
    if _NVRM_ID.fullmatch(line):
        from gpuhealth.parsers.proc_nvidia import parse_proc_driver_version  # only for a text holding the line

        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        text = line + ("\n" + following if following.startswith("GCC version:") and len(following) <= MAX_LINE else "")
        try:
            info = parse_proc_driver_version(text)
        except ParseError:
            return None
        values = (("version", info.version), ("flavour", info.flavour), ("banner", info.banner),
                  ("compiler", info.compiler))
        return Banner("/proc/driver/nvidia/version", line, index, tuple((k, v) for k, v in values if v))
    return _match("nvidia-container-cli info", _NVRM_CLI, line, index, ("version",))


def _smi_query(line: str, index: int) -> Banner | None:
    match = _SMI_QUERY.fullmatch(line)
    if match is None:
        return None
    driver = match["key"] in ("Driver", "KMD")
    if not (_DRIVER_VERSION if driver else _CUDA_VERSION).fullmatch(match["value"]):
        return None
    return Banner("nvidia-smi -q", line, index, (("driver" if driver else "cuda", match["value"]),))


def _linux(line: str, index: int) -> Banner | None:
    """``/proc/version`` (the release and the compiler that built it) or ``uname -a`` (the release, the machine)."""
    if line.startswith("Linux version "):
        match = _PROC_VERSION.match(line)
        if match is None:
            return None
        from gpuhealth.parsers.install import parse_kernel_compiler

        try:
            compiler: str | None = parse_kernel_compiler(line)
        except ParseError:
            compiler = None
        values = (("release", match["release"]),) + ((("compiler", compiler),) if compiler else ())
        return Banner("/proc/version", line, index, values)
    return _match("uname -a", _UNAME, line, index, ("release", "arch"))


def _collect_env(line: str, index: int) -> Banner | None:
    match = _COLLECT_ENV.fullmatch(line)
    if match is None or match["value"] in _UNKNOWN:
        return None
    key, value = _COLLECT_ENV_KEYS[match["key"]], match["value"]
    if key == "available":
        if value.lower() not in ("true", "false", "yes", "no"):
            return None
        value = "true" if value.lower() in ("true", "yes") else "false"
    elif not (_CUDA_VERSION if key == "torch_cuda" else _TORCH_VERSION).match(value):
        return None
    return Banner("collect_env", line, index, ((key, value),))

