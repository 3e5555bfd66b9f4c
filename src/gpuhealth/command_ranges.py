"""Where a printed command is valid: the distributions and releases a package name or tool exists on.

Every command gpuhealth prints may be pasted as root, so it must be valid for the host it targets (issue 22, "What to
build" 4). Some are valid only on some releases: ``ubuntu-drivers`` is Ubuntu's, the versioned ``nvidia-utils-<branch>``
packages are Ubuntu's (Debian's are unversioned), NVIDIA's ``dnf module`` streams exist on RHEL 8/9 and their rebuilds
but not on RHEL 10 or Fedora. ``knowledge/command_ranges.csv`` says so, a row per (command pattern, distribution ids,
release range), each with its source; a command is valid where any of its rows holds.

:func:`out_of_range` is the one test: the fix script writes a command that is out of range for the host as a comment
saying why, and tests/test_fix_safe.py holds every fix row and every recommend command to it. A host whose distribution
or release is unknown is never judged: the command stays as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from gpuhealth.model import OsInfo


@dataclass(frozen=True)
class Range:
    pattern: re.Pattern[str]
    os_ids: frozenset[str]
    min_version: tuple[int, ...] | None
    max_version: tuple[int, ...] | None
    what: str
    source: str

    def holds(self, os_info: OsInfo) -> bool:
        if not {os_info.id or "", *os_info.id_like} & self.os_ids:
            return False
        version = _version(os_info.version_id)
        if version is None:
            return self.min_version is None and self.max_version is None
        top = len(self.max_version) if self.max_version else 0
        return ((self.min_version is None or version >= self.min_version)
                and (self.max_version is None or version[:top] <= self.max_version))


def _version(text: str | None) -> tuple[int, ...] | None:
    numbers = re.findall(r"[0-9]+", text or "")
    return tuple(int(n) for n in numbers) if numbers else None


@cache
def ranges() -> tuple[Range, ...]:
    from gpuhealth.knowledge import table_rows

    return tuple(Range(re.compile(row["pattern"]), frozenset(row["os_ids"].split(";")), _version(row["min_version"]),
                       _version(row["max_version"]), row["what"], row["source"])
                 for row in table_rows("command_ranges.csv"))


def out_of_range(command: str, os_info: OsInfo | None) -> str:
    """Why ``command`` is not valid on ``os_info``'s distribution and release ("for Ubuntu's ubuntu-drivers tool
    ...: this host is debian 12"); empty when it is, when no row covers it, or when the host's distribution is not
    known (os-release absent: an inferred family names no distribution)."""
    # a family inferred from a package listing names no distribution, unless an rpm tag gave its release (.el7)
    if os_info is None or not (os_info.id or (os_info.family_from and os_info.version_id and os_info.id_like)):
        return ""
    rows = [r for r in ranges() if r.pattern.search(command)]
    if not rows or any(r.holds(os_info) for r in rows):
        return ""
    host = " ".join(x for x in (os_info.id or os_info.id_like[0], os_info.version_id) if x)
    return f"valid only for {rows[0].what}: this host is {host}"
