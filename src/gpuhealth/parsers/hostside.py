"""The host beside the GPUs: /proc and sysfs counters, `df -i` and InfiniBand port attributes. Pure functions,
text in, numbers out; text in another shape raises ``ParseError`` with the reason."""

from __future__ import annotations

from gpuhealth.lazyre import lazy_re
from gpuhealth.model import InodeUse, ParseError

# drivers/infiniband/core/sysfs.c, rate_show: "%d%s Gb/sec (%dX%s)", e.g. "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)"
_RATE = lazy_re(r"^\s*([0-9]{1,5}(?:\.[0-9]{1,3})?)\s*Gb/sec")


MAX_DIGITS = 20  # a 64-bit count has at most 20 digits; longer "numbers" are not the kernel's


def is_count(text: str) -> bool:
    """Whether ``text`` is a count the kernel could print: decimal digits, at most MAX_DIGITS of them."""
    return text.isdecimal() and len(text) <= MAX_DIGITS


def parse_file_nr(text: str) -> tuple[int, int]:
    """/proc/sys/fs/file-nr: "allocated unused max" (Documentation/admin-guide/sysctl/fs.rst) -> (allocated, max)."""
    fields = text.split()
    if len(fields) != 3 or not all(is_count(f) for f in fields):
        raise ParseError(f"file-nr: expected three numbers, got {text.strip()[:80]!r}")
    return int(fields[0]), int(fields[2])


def parse_loadavg_tasks(text: str) -> int:
    """/proc/loadavg's fourth field "running/total" (proc(5)): the scheduling entities (processes and threads)
    that exist now."""
    fields = text.split()
    if len(fields) < 4 or "/" not in fields[3]:
        raise ParseError(f"loadavg: no running/total field in {text.strip()[:80]!r}")
    total = fields[3].split("/", 1)[1]
    if not is_count(total):
        raise ParseError(f"loadavg: {fields[3]!r} is not running/total")
    return int(total)


def parse_int(text: str, what: str) -> int:
    value = text.strip()
    if not is_count(value):
        raise ParseError(f"{what}: {value[:40]!r} is not a count")
    return int(value)


def parse_df_inodes(text: str) -> tuple[InodeUse, ...]:
    """`df -P -l -i`: "Filesystem Inodes IUsed IFree IUse% Mounted on" (GNU coreutils). A file system that does
    not count inodes (btrfs) shows 0 (or "-") and is kept as 0."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("Filesystem") or "Inodes" not in lines[0]:
        raise ParseError("df -i: no 'Filesystem Inodes' header")
    rows = []
    for line in lines[1:]:
        fields = line.split(None, 5)
        if len(fields) < 6:
            continue
        inodes, free = (int(f) if is_count(f) else 0 for f in (fields[1], fields[3]))
        rows.append(InodeUse(filesystem=fields[0], mount_point=fields[5], inodes=inodes, free=free))
    return tuple(rows)


def ib_rate_gbps(rate: str | None) -> float | None:
    """The number of "400 Gb/sec (4X NDR)"; None when the text is not in the kernel's form."""
    match = _RATE.match(rate or "")
    return float(match.group(1)) if match else None


def ib_state_name(value: str | None) -> str | None:
    """"4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp" (the kernel prints "<number>: <name>")."""
    if value is None:
        return None
    return value.split(":", 1)[-1].strip() or None
