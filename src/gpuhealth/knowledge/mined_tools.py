"""The error and warning messages of NVIDIA's container toolkit and driver installer, mined from their source.

``tools/mine/mine_tools.py`` reads NVIDIA/nvidia-container-toolkit (its ``fmt.Errorf``/``errors.New``/logger
messages) and NVIDIA/nvidia-installer (its ``ui_error``/``ui_warn`` formats) at pinned tags into ``mined/tools.csv``,
in the columns of the driver's table (``mined.py``). ``mined_tool_families.csv`` (hand-written, each row cited)
says what a family means and which check and cause it points to. docs/mined-messages.md says how to regenerate.

Read only when a pasted line looks like an error and no row of the signature catalogue explains it (check GH310):
``lookup`` is the entry point; its first call indexes the table by each row's rarest fixed word, and a line is tried
against the rows under its own words only.
"""

from __future__ import annotations

import functools

from gpuhealth.knowledge import read_table, table_rows
from gpuhealth.knowledge.mined import (
    _FIXED_WORD,
    _SPEC,
    _WORD,
    Family,
    MinedMessage,
    _compiled,
    _lines_by_word,
    _message,
)
from gpuhealth.lazyre import lazy_re

TABLE = "mined/tools.csv"
FAMILIES = "mined_tool_families.csv"
# A toolkit message is read only on a line that shows it came from the container stack: its logrus prefix
# ("ERRO[0000]", level=error), a name of its programs, docker's/containerd's "OCI runtime" wrapper, a CDI device or
# its hook. nvidia-installer prints "ERROR: "/"WARNING: " before its messages (its ui_error/ui_warn). Without the
# sign, a toolkit's generic "failed to create directory" would claim any program's line.
_TOOLKIT_SIGN = lazy_re(r"(?i)nvidia|OCI runtime|\bcdi\b|\bhook\b|\bERRO\[|\bWARN\[|level=(?:error|warning)")
_INSTALLER_SIGN = lazy_re(r"^\s*(?:ERROR|WARNING):|nvidia-installer")
# libnvidia-container's messages are short ("open failed", "nvml error"): read only on a line naming its program, as
# every line it prints does ("nvidia-container-cli: mount error: ...", inside docker's "OCI runtime create failed"), or
# its debug log's "E0114 04:33:38.293546 1234 nvc.c:280] ..." (glog's layout, naming the library's source file).
_LIBNVC_SIGN = lazy_re(r"(?i)nvidia-container-cli|libnvidia-container|^[IWE]\d{4} [\d:.]+ +\d+ "
                       r"(?:nvc\w*|driver|rpc|dxcore|ldcache|utils|cgroup\w*|jetson_\w+)\.[ch]:\d+\]")
# The device plugin logs with klog ("E0819 07:02:54.757556       1 rm.go:109] ..."), the GPU operator's validator with
# logrus (level=error, or its "Error: ..." at exit); or a line names the programs or the resource they serve.
_K8S_SIGN = lazy_re(r"\b[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w.-]+\.go:\d+\]|\bERRO\[|\bWARN\[|"
                    r"level=(?:error|warning|fatal)|msg=\"Error:|"
                    r"(?i:device.plugin|gpu-feature-discovery|nvidia\.com/gpu|validator|gpu-operator)")
# nvidia-mig-parted logs with logrus ("FATA[0000] ...", or time=... level=fatal msg=... without a terminal); the GPU
# operator's MIG manager runs it and logs the same way; or the line names the programs.
_MIG_SIGN = lazy_re(r"\b(?:FATA|ERRO|WARN)\[|level=(?:error|warning|fatal)|(?i:mig-parted|mig-manager)")
PROGRAMS = {"NVIDIA/nvidia-installer": "nvidia-installer",
            "NVIDIA/nvidia-container-toolkit": "the NVIDIA container toolkit",
            "NVIDIA/libnvidia-container": "libnvidia-container",
            "NVIDIA/k8s-device-plugin": "the NVIDIA device plugin",
            "NVIDIA/gpu-operator": "the GPU operator",
            "NVIDIA/mig-parted": "nvidia-mig-parted"}
_SIGNS = {"NVIDIA/nvidia-installer": _INSTALLER_SIGN, "NVIDIA/libnvidia-container": _LIBNVC_SIGN,
          "NVIDIA/k8s-device-plugin": _K8S_SIGN, "NVIDIA/gpu-operator": _K8S_SIGN, "NVIDIA/mig-parted": _MIG_SIGN}


@functools.lru_cache(maxsize=1)
def families() -> dict[str, Family]:
    return {row["family"]: Family(row["family"], row["severity"], row["title"], row["meaning"], row["code"],
                                  row["cause"], row["decides"], tuple(row["explains"].split()),
                                  row["source_title"], row["source_url"])
            for row in table_rows(FAMILIES)}


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, tuple[str, ...]]:
    return _lines_by_word(TABLE)


def messages() -> tuple[MinedMessage, ...]:
    """Every row, in the table's order (tests and docs read them all)."""
    return tuple(_message(line) for line in read_table(TABLE).splitlines()[1:])


@functools.lru_cache(maxsize=512)
def _candidates(word: str) -> tuple[tuple[MinedMessage, tuple[str, ...]], ...]:
    rows = sorted(map(_message, _index().get(word, ())), key=lambda r: -r.fixed_chars)
    return tuple((row, tuple({w.lower() for w in _FIXED_WORD.findall(_SPEC.sub(" ", row.format))})) for row in rows)


@functools.lru_cache(maxsize=2048)
def lookup(line: str) -> MinedMessage | None:
    """The mined row whose pattern is found in the pasted line (a toolkit message may sit inside docker's "OCI
    runtime create failed" line, wrapped in its callers' words). When several are found: Go and libnvidia-container
    wrap an error in their callers' messages ("error starting plugins: ...: failed to initialize NVML: ..."), so the
    innermost (the one found last in the line) says what failed; a row found inside another's text is the same
    message said with less, so the one around it is kept; among rows found at the same place, the most specific (most
    fixed text). None when none is found."""
    lowered = line.lower()
    found = [c for word in {w.lower() for w in _WORD.findall(line)} for c in _candidates(word)]
    spans = []
    for row, words in sorted(found, key=lambda c: -c[0].fixed_chars):
        if all(w in lowered for w in words):
            m = _compiled(row.pattern).search(line)
            if m is not None:
                spans.append((m.start(), m.end(), row))
    outer = [(start, end, row) for start, end, row in spans
             if not any(s <= start and end <= e and e - s > end - start for s, e, _ in spans)]
    return max(outer, key=lambda x: (x[0], x[2].fixed_chars))[2] if outer else None


def match(line: str) -> MinedMessage | None:
    """``lookup``, for a pasted line that shows the sign of the program the row belongs to."""
    row = lookup(line)
    if row is None:
        return None
    # several programs print the same message ("error resolving link '%s'"): the one whose sign the line shows
    for same in (row, *(c for c, _ in _candidates(row.key) if c.format == row.format and c.id != row.id)):
        if _SIGNS.get(same.repository, _TOOLKIT_SIGN).search(line):
            return same
    return None


def program(row: MinedMessage) -> str:
    """Who printed the row's message, in words: "nvidia-installer", "the NVIDIA container toolkit's nvidia-ctk"."""
    name = PROGRAMS.get(row.repository, row.repository)
    if row.component in (name, "nvidia-installer") or row.component.startswith(
            ("toolkit-", "device-plugin-", "mig-parted-")):
        return name
    return f"{name}'s {row.component}"
