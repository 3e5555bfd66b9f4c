"""Environment and library listings as people paste them: ``env``/``printenv``, ``echo $LD_LIBRARY_PATH``,
``ldconfig -p``, ``ls -l /usr/local/cuda*`` / ``ls -la /usr/local``, ``ls -l /dev/nvidia*`` and
``modinfo nvidia``.

Pure functions, text in, values out; ParseError when the text is not the listing. Lines are cut at
``MAX_LINE`` characters before any pattern sees them, and the patterns have no nested or adjacent
ambiguous quantifiers, so a 200 KB line without a newline costs linear time.
"""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import LibraryEntry, ParseError
from gpuhealth.parsers._text import text_lines
from gpuhealth.parsers.cuda import cuda_version_in_path, kept_libraries, parse_ldconfig_cache
from gpuhealth.records import record

MAX_LINES = 50000  # ldconfig -p of a big host: ~5000 lines
MAX_LINE = 4096
MAX_VALUE = 8192  # an environment value longer than this is cut (a PATH of a few hundred entries fits)

_ENV_LINE = lazy_re(r"^(?:declare -x |export )?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")


def _lines(text: str, what: str) -> list[str]:
    return text_lines(text, what, max_lines=MAX_LINES, max_line=MAX_LINE)


# --------------------------------------------------------------------------- env / printenv


def parse_env(text: str) -> dict[str, str]:
    """``env``, ``printenv``, ``export -p``/``declare -x`` output: NAME -> value (quotes of the export forms
    removed). A value continued on following lines (a multi-line variable) keeps only its first line;
    at least half of the non-empty lines must be assignments, else ParseError.
    """
    variables: dict[str, str] = {}
    assignments = other = 0
    for raw in _lines(text, "environment listing"):
        line = raw.rstrip()
        if not line.strip():
            continue
        match = _ENV_LINE.match(line)
        if not match:
            other += 1
            continue
        assignments += 1
        value = match["value"]
        if line.startswith(("declare -x ", "export ")) and len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        variables[match["name"]] = value[:MAX_VALUE]
    if not assignments or assignments < other:
        raise ParseError("not an environment listing (NAME=value lines)")
    return variables


def parse_path_list(text: str) -> tuple[str, ...]:
    """``echo $LD_LIBRARY_PATH``: one line of directories separated by ``:`` (a leading
    ``LD_LIBRARY_PATH=`` is accepted). Empty entries, which mean the current directory to the loader, are
    kept as ``""``. An empty line is an empty path list; anything else is a ParseError.
    """
    lines = [line.strip() for line in _lines(text, "path list") if line.strip()]
    if not lines:
        return ()
    if len(lines) != 1:
        raise ParseError("a path list is one line")
    line = re.sub(r"^(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=", "", lines[0]).strip("'\"")
    parts = line.split(":")
    if any(" " in p or (p and not p.startswith(("/", "$", "~", "."))) for p in parts):
        raise ParseError("not a ':'-separated list of directories")
    return tuple(parts)


# --------------------------------------------------------------------------- ldconfig -p

# The CUDA toolkit's own libraries: a directory holding one of them belongs to a toolkit.
_TOOLKIT_LIBRARY = lazy_re(r"^lib(?:cudart|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc|nppc|nvJitLink)"
                              r"\.so")


@record
class LdconfigListing:
    libraries: tuple[LibraryEntry, ...]  # libcuda, libnvidia-ml and libcudart lines, in the cache's order
    cuda_dirs: tuple[str, ...]  # directories with CUDA toolkit libraries whose path names a CUDA version


def parse_ldconfig_listing(text: str) -> LdconfigListing:
    """``ldconfig -p`` (whole, or through ``grep``): the NVIDIA library lines and the versioned CUDA toolkit
    directories the loader's cache holds (``/usr/local/cuda-11.8/targets/x86_64-linux/lib``)."""
    cache = parse_ldconfig_cache(text)
    dirs: dict[str, None] = {}
    for entry in cache:
        directory = entry.path.rsplit("/", 1)[0]
        if _TOOLKIT_LIBRARY.match(entry.name) and cuda_version_in_path(directory):
            dirs.setdefault(directory, None)
    return LdconfigListing(kept_libraries(cache), tuple(dirs))


# --------------------------------------------------------------------------- ls -l

_MODE = lazy_re(r"^[-dlcbpsD][-rwxsStTl]{9}[.+@]?$")
_TIME_OR_YEAR = lazy_re(r"^(?:\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?|\d{4})$")


@record
class LsEntry:
    """One ``ls -l`` line (or a bare name from ``ls``/``ls -d``): the path, its type and a link's target."""

    path: str  # as printed, prefixed by the directory header above it ("/usr/local/cuda-12.4")
    kind: str  # "dir", "link", "char", "file", "other", "" (a bare name: type unknown)
    target: str | None = None


def _ls_name(line: str, tokens: list[str]) -> str | None:
    """The name part of an ``ls -l`` line: what follows the time (or year) column."""
    for index in range(5, min(len(tokens), 12)):
        if _TIME_OR_YEAR.match(tokens[index]):
            parts = line.split(None, index + 1)
            return parts[index + 1] if len(parts) > index + 1 else None
    return None


def parse_ls(text: str) -> tuple[LsEntry, ...]:
    """``ls -l``/``ls -la``/``ls -ld`` (also ``ls -d`` bare paths) output, directory headers followed.

    ParseError when no line is an ``ls`` line. ``ls: cannot access 'X': No such file or directory`` is a
    valid answer (nothing there): an empty tuple.
    """
    entries: list[LsEntry] = []
    directory = ""
    seen = False
    for raw in _lines(text, "ls output"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("ls: cannot access") or line.startswith("total "):
            seen = True
            continue
        if line.endswith(":") and line.startswith("/") and " " not in line:
            directory = line[:-1].rstrip("/")
            entries.append(LsEntry(directory, "dir"))
            seen = True
            continue
        tokens = line.split()
        if _MODE.match(tokens[0]) and len(tokens) >= 6:
            name = _ls_name(line, tokens)
            if not name:
                continue
            seen = True
            target = None
            if " -> " in name:
                name, _, target = name.partition(" -> ")
            kind = {"d": "dir", "l": "link", "c": "char", "-": "file"}.get(tokens[0][0], "other")
            entries.append(LsEntry(_joined(directory, name.strip()), kind, target.strip() if target else None))
        elif len(tokens) == 1 and line.startswith("/") and not line.endswith(":"):
            seen = True
            entries.append(LsEntry(line.rstrip("/"), ""))
    if not seen:
        raise ParseError("no ls -l lines ('drwxr-xr-x 2 root root 4096 Mar  1 12:00 name')")
    return tuple(entries)


def _joined(directory: str, name: str) -> str:
    if name.startswith("/") or not directory:
        return name
    return f"{directory}/{name}"


# --------------------------------------------------------------------------- modinfo nvidia

_MODINFO_KEY = lazy_re(r"[a-z_]{1,40}")
_MODINFO_NOT_FOUND = lazy_re(r"modinfo: ERROR: Module (?P<module>\S+) not found")


@record
class ModuleInfo:
    found: bool
    filename: str | None = None
    version: str | None = None
    vermagic: str | None = None
    signer: str | None = None  # "" when the module has no signature
    license: str | None = None


def parse_modinfo_listing(text: str) -> ModuleInfo:
    """``modinfo nvidia``: the module's file, version, vermagic and signer; or not found (``modinfo: ERROR:
    Module nvidia not found.``, which means no nvidia module for the running kernel)."""
    if not isinstance(text, str):
        raise ParseError("modinfo output must be text")
    head = text[:MAX_LINE * 4]
    missing = _MODINFO_NOT_FOUND.search(head)
    if missing and "filename:" not in head:
        return ModuleInfo(found=False)
    fields: dict[str, str] = {}
    for line in _lines(text, "modinfo output"):
        key, colon, value = line.partition(":")
        if colon and _MODINFO_KEY.fullmatch(key):
            fields.setdefault(key, value.strip())
    if "filename" not in fields:
        raise ParseError("no 'filename:' field and no 'Module nvidia not found'")
    return ModuleInfo(found=True, filename=fields["filename"], version=fields.get("version"),
                      vermagic=fields.get("vermagic"), signer=fields.get("signer", ""), license=fields.get("license"))


# --------------------------------------------------------------------------- uname, module files

_UNAME_A = lazy_re(r"^Linux \S+ (?P<release>\d+\.\d+[\w.+~-]*) #\S*(?: .*? (?P<arch>x86_64|aarch64|ppc64le|s390x) "
                      r"\S+ \S+ GNU/Linux)?")
_RELEASE = lazy_re(r"^\d+\.\d+\.\d+-[0-9A-Za-z._+~-]+$")


def parse_uname(text: str) -> tuple[str, str | None]:
    """``uname -a`` or ``uname -r``: (kernel release, architecture or None)."""
    lines = [line.strip() for line in _lines(text, "uname output") if line.strip()]
    if len(lines) != 1:
        raise ParseError("uname prints one line")
    match = _UNAME_A.match(lines[0])
    if match:
        return match["release"], match["arch"]
    if _RELEASE.match(lines[0]):
        return lines[0], None
    raise ParseError("not uname -a ('Linux host 5.15.0-105-generic #115 ...') or uname -r output")


_MODULE_PATH = lazy_re(r"^/(?:usr/)?lib/modules/(?P<release>[^/\s]+)/(?P<rest>\S+)$")
_NVIDIA_KO = lazy_re(r"(?:^|/)nvidia\.ko(?:\.(?:xz|zst|gz))?$")


def parse_module_files(text: str) -> dict[str, str | None]:
    """``find /lib/modules -name '*nvidia*'`` (or ``ls -d``/``locate``): kernel release -> the nvidia.ko found
    for it, or None when only other nvidia files (nvidiafb.ko, folders) are listed for that kernel."""
    kernels: dict[str, str | None] = {}
    for raw in _lines(text, "module file listing"):
        match = _MODULE_PATH.match(raw.strip())
        if not match:
            continue
        release = match["release"]
        if _NVIDIA_KO.search(match["rest"]):
            kernels[release] = kernels.get(release) or raw.strip()
        else:
            kernels.setdefault(release, None)
    if not kernels:
        raise ParseError("no /lib/modules/<release>/... paths")
    return kernels
