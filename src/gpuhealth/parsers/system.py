"""Operating-system evidence: ``/etc/os-release``, ``/etc/redhat-release``, loaded modules, modprobe.d."""

from __future__ import annotations

import re

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import OsInfo, ParseError

# --------------------------------------------------------------------------- os-release

_OS_RELEASE_LINE = lazy_re(r"^\s*(?:export\s+)?(?P<key>[A-Z][A-Z0-9_]*)=(?P<value>.*?)\s*$")
_OS_RELEASE_KEYS = {"ID", "ID_LIKE", "NAME", "VERSION_ID", "PRETTY_NAME", "VERSION"}


def _unquote(value: str) -> str:
    """Shell-style unquoting as os-release(5) allows: "double", 'single' or bare, with \\ escapes."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        quote, value = value[0], value[1:-1]
        if quote == '"' and "\\" in value:  # (no backslash: nothing to unescape, no pattern compiled)
            value = re.sub(r"\\([\"\\$`])", r"\1", value)
        return value
    return re.sub(r"\\(.)", r"\1", value) if "\\" in value else value


def parse_os_release(text: str) -> OsInfo:
    """``/etc/os-release`` (or ``/usr/lib/os-release``): ID, ID_LIKE, VERSION_ID, PRETTY_NAME."""
    if not isinstance(text, str):
        raise ParseError("os-release must be text")
    values: dict[str, str] = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.lstrip().startswith("#"):
            continue
        match = _OS_RELEASE_LINE.match(line)
        if match:
            values.setdefault(match["key"], _unquote(match["value"]))
    if not _OS_RELEASE_KEYS & values.keys():
        raise ParseError("no os-release keys (ID, NAME, VERSION_ID, PRETTY_NAME)")
    return OsInfo(
        id=values.get("ID") or None,
        id_like=tuple(values.get("ID_LIKE", "").split()),
        version_id=values.get("VERSION_ID") or None,
        pretty_name=values.get("PRETTY_NAME") or values.get("NAME") or None,
    )


# --------------------------------------------------------------------------- redhat-release

_RELEASE = lazy_re(r"^(?P<name>.+?)(?<!\s)\s+release\s+(?P<version>\d[\w.]*)(?:\s.*)?$", re.IGNORECASE)
# Distribution name (start of the release line) -> (os-release ID, ID_LIKE) as those systems ship them.
_RHEL_FAMILY: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("red hat enterprise linux", "rhel", ("fedora",)),
    ("centos", "centos", ("rhel", "fedora")),
    ("rocky", "rocky", ("rhel", "centos", "fedora")),
    ("almalinux", "almalinux", ("rhel", "centos", "fedora")),
    ("oracle linux", "ol", ("fedora",)),
    ("scientific linux", "scientific", ("rhel", "centos", "fedora")),
    ("cloudlinux", "cloudlinux", ("rhel", "fedora")),
    ("euleros", "euleros", ("rhel", "fedora")),
    ("fedora", "fedora", ()),
    ("amazon linux", "amzn", ("centos", "rhel", "fedora")),
)


def parse_redhat_release(text: str) -> OsInfo:
    """``/etc/redhat-release`` (also centos-/rocky-/system-release): ``CentOS Linux release 7.9.2009 (Core)``.

    version_id is the version as printed (``7.9.2009``), pretty_name the whole line.
    """
    if not isinstance(text, str):
        raise ParseError("redhat-release must be text")
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    match = _RELEASE.match(line)
    if match is None:
        raise ParseError("no '<name> release <version>' line")
    name = match["name"].lower()
    os_id: str | None = None
    id_like: tuple[str, ...] = ()
    for prefix, family_id, family_like in _RHEL_FAMILY:
        if name.startswith(prefix):
            os_id, id_like = family_id, family_like
            break
    return OsInfo(id=os_id, id_like=id_like, version_id=match["version"], pretty_name=line)


# --------------------------------------------------------------------------- /proc/modules and lsmod

_MODULE_LINE = lazy_re(r"^(?P<name>[A-Za-z0-9_-]+)\s+(?P<size>\d+)\s+(?P<used>-?\d+|-)(?:\s|$)")
_LSMOD_HEADER = lazy_re(r"^\s*Module\s+Size\s+Used\s+by\s*$")


def parse_proc_modules(text: str) -> tuple[str, ...]:
    """Loaded module names, in listed order, from ``/proc/modules`` or ``lsmod`` output.

    Lines that are not module lines (the lsmod header, a shell prompt) are skipped; ParseError when
    there are none.
    """
    if not isinstance(text, str):
        raise ParseError("module list must be text")
    names: dict[str, None] = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        if _LSMOD_HEADER.match(line):
            continue
        match = _MODULE_LINE.match(line.strip())
        if match:
            names.setdefault(match["name"], None)
    if not names:
        raise ParseError("no module lines (name size refcount ...)")
    return tuple(names)


# --------------------------------------------------------------------------- modprobe.d

_MODPROBE_KEYWORDS = {"alias", "blacklist", "install", "options", "remove", "softdep", "weakdep"}
_GREP_PREFIX = lazy_re(r"^[^\s:]+\.conf:(?:\d+:)?")  # "grep -r" output: /etc/modprobe.d/x.conf:line
# "install <module> <command>" where the command only fails or does nothing: the module never loads.
_NOOP_COMMAND = lazy_re(r"^(?:/usr)?(?:/s?bin/)?(?:false|true)(?:\s*;?\s*)$|^exit(?:\s+\d+)?\s*$")


def _module(name: str) -> str:
    """modprobe treats ``-`` and ``_`` alike; /proc/modules prints ``_``."""
    return name.replace("-", "_")


def logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined, as modprobe reads them."""
    lines: list[str] = []
    pending = ""
    for raw in text.replace("\r\n", "\n").split("\n"):
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


_HEAD_BANNER = lazy_re(r"^==> (?P<path>\S+) <==$")  # head/tail of several files: "==> /etc/modprobe.d/x.conf <=="
_GREP_FILE = lazy_re(r"^(?P<path>[^\s:]+\.conf):(?:\d+:)?")


def modprobe_text_by_file(text: str) -> dict[str, str]:
    """modprobe.d content split by the file each line came from, as ``grep -r`` (``/etc/modprobe.d/x.conf:blacklist
    nvidia``, with ``-n`` a line number after it) and ``head``/``tail`` of several files (``==> x.conf <==``) name
    it; lines no file names are under "" (one file pasted as it is, or ``modprobe -c``). Lines keep their order."""
    if not isinstance(text, str):
        raise ParseError("modprobe.d content must be text")
    files: dict[str, list[str]] = {}
    current = ""
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        banner = _HEAD_BANNER.match(line)
        if banner:
            current = banner["path"]
            continue
        named = _GREP_FILE.match(line)
        if named:
            files.setdefault(named["path"], []).append(line[named.end():])
        else:
            files.setdefault(current, []).append(raw)
    return {path: "\n".join(lines) for path, lines in files.items() if any(line.strip() for line in lines)}


def parse_modprobe_blacklist(text: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """Blacklisted modules and ``options`` per module from modprobe.d content.

    A module counts as blacklisted for ``blacklist <m>``, ``install <m> /bin/false`` (or ``/bin/true``,
    ``exit 1``: the module can never be loaded by name) and ``alias <m> off``. Several files may be
    concatenated, also as ``grep -r`` output. Module names use ``_`` for ``-``. Options for one module
    from several lines are joined with a space. Empty content is valid (nothing blacklisted);
    ParseError when there is content but no modprobe.d directive at all.
    """
    if not isinstance(text, str):
        raise ParseError("modprobe.d content must be text")
    blacklisted: dict[str, None] = {}
    options: dict[str, str] = {}
    directives = 0
    other = 0
    for raw in logical_lines(text):
        line = _GREP_PREFIX.sub("", raw.strip(), count=1).strip()
        if not line or line.startswith("#") or (line.startswith("==>") and line.endswith("<==")):
            continue
        words = line.split()
        keyword = words[0].lower()
        if keyword not in _MODPROBE_KEYWORDS or len(words) < 2:
            other += 1
            continue
        directives += 1
        module = _module(words[1])
        if keyword == "blacklist":
            blacklisted.setdefault(module, None)
        elif keyword == "install" and _NOOP_COMMAND.match(" ".join(words[2:])):
            blacklisted.setdefault(module, None)
        elif keyword == "alias" and len(words) == 3 and words[2].lower() == "off":
            blacklisted.setdefault(module, None)
        elif keyword == "options" and len(words) > 2:
            value = " ".join(words[2:])
            options[module] = f"{options[module]} {value}" if module in options else value
    if directives == 0 and other:
        raise ParseError("no modprobe.d directives (blacklist, install, options, alias ...)")
    return tuple(blacklisted), options
