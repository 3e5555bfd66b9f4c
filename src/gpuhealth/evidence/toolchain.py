"""Evidence kinds for the toolchain that builds the nvidia module (GH505): ``cat /proc/version`` (the
running kernel and the compiler that built it) and ``gcc --version`` / ``cc --version`` (the compiler
that builds the module now). They fill the ``install`` fields live ``check`` fills from the same two
sources (``collect/install.py``), so GH505 judges a paste the way it judges the host.
"""

from __future__ import annotations

from typing import Any

from gpuhealth.evidence.registry import evidence_kind
from gpuhealth.lazyre import guarded_re, has, starts
from gpuhealth.model import InstallState, OsInfo

_PROC_VERSION = guarded_re(r"Linux version \S+ \(.*\) #\d", may=starts("Linux version "), at_start=True)
# "gcc (Ubuntu 5.4.0-6ubuntu1~16.04.4) 5.4.0 20160609", "x86_64-linux-gnu-gcc-12 (Debian 12.2.0-14) 12.2.0",
# "cc (GCC) 11.4.1 20230605 (Red Hat 11.4.1-2)": a compiler name, its package in parentheses, a version.
_GCC_BANNER = guarded_re(r"\S*(?:gcc|cc)(?:-\d+(?:\.\d+)*)? \(.{0,200}\) \d+\.\d+", may=has("cc"))
_HEAD = 4096


def _content(text: str, limit: int) -> list[str]:
    return [line.strip() for line in text[:_HEAD].splitlines()[:limit] if line.strip()]


def _looks_like_proc_version(text: str) -> bool:
    lines = _content(text, 4)
    return len(lines) == 1 and bool(_PROC_VERSION.match(lines[0]))


@evidence_kind("kernel-version", commands=(r"(?:cat|less|more|head|tail)\s+/proc/version\s*$",), priority=387,
               recognise=_looks_like_proc_version)
def _proc_version(text: str, source: str) -> dict[str, Any]:
    """The running kernel's release and the compiler that built it (GH505 compares it with gcc's)."""
    from gpuhealth.parsers.install import parse_proc_version

    release, compiler = parse_proc_version(text)
    return {"os": OsInfo(kernel_release=release),
            "install": InstallState(kernel_release=release, kernel_compiler=compiler)}


def _looks_like_gcc_version(text: str) -> bool:
    """The banner line, alone (``gcc --version | head -1``) or followed by gcc's FSF copyright notice."""
    lines = _content(text, 3)
    if not lines or not _GCC_BANNER.match(lines[0]):
        return False
    return len(lines) == 1 or (lines[1].startswith("Copyright") and "Free Software Foundation" in lines[1])


@evidence_kind("gcc-version",
               commands=(r"(?:[\w.]+-)*(?:gcc|cc)(?:-\d+(?:\.\d+)*)?\s+(?:--version|-v\b)",), priority=388,
               recognise=_looks_like_gcc_version)
def _gcc_version(text: str, source: str) -> dict[str, Any]:
    """The compiler that builds the module now (GH504: present; GH505: its version)."""
    from gpuhealth.parsers.install import parse_gcc_version

    version, banner = parse_gcc_version(text)
    return {"install": InstallState(gcc_present=True, gcc_version=version, gcc_banner=banner)}


# Linux's Makefile (prepare), when CC_VERSION_TEXT differs from CONFIG_CC_VERSION_TEXT, names both banners:
#   warning: the compiler differs from the one used to build the kernel
#     The kernel was built by: x86_64-linux-gnu-gcc-12 (Ubuntu 12.3.0-1ubuntu1~22.04) 12.3.0
#     You are using:           cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
_BUILT_BY = "The kernel was built by:"
_USING = "You are using:"
_CLANG_VERSION = guarded_re(r"clang version (\d+(?:\.\d+)+)", may=has("clang version"))


def kbuild_compiler_lines(lines: list[str], source: str) -> dict[str, InstallState]:
    """The install overlay for the two compilers the kernel's build names when they differ (a DKMS make.log, a
    pasted build): the kernel's as ``/proc/version`` would give it, the current one as ``gcc --version`` would.
    Empty when the lines hold no such pair; the banners' versions only, so the same version under another
    name (``x86_64-linux-gnu-gcc-13`` against ``gcc-13``) compares equal in GH505."""
    built = using = None
    for line in lines[:5000]:
        if _BUILT_BY in line:
            built = line.split(_BUILT_BY, 1)[1].strip()[:300]
        elif _USING in line and built is not None:
            using = line.split(_USING, 1)[1].strip()[:300]
            break
    if built is None or using is None:
        return {}
    from gpuhealth.model import ParseError
    from gpuhealth.parsers.install import parse_gcc_version

    try:
        kernel_version, _ = parse_gcc_version(built)
        version, banner = parse_gcc_version(using)
    except ParseError:  # clang on either side, or a banner of another form: GH505 does not compare those
        clang = _CLANG_VERSION.search(built)
        return {"install": InstallState(kernel_compiler=f"clang {clang[1]}")} if clang else {}
    return {"install": InstallState(kernel_compiler=f"gcc {kernel_version}", gcc_present=True, gcc_version=version,
                                    gcc_banner=banner)}
