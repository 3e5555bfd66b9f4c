"""Mine the NVIDIA driver's error and warning messages from a git checkout of NVIDIA/open-gpu-kernel-modules.

    nice -n 10 python3 tools/mine/mine_nvrm.py --checkout PATH [--out src/gpuhealth/knowledge/mined/nvrm.csv]

PATH is a clone (or a bare git directory) of https://github.com/NVIDIA/open-gpu-kernel-modules with its release
tags. The miner reads the pinned tags (``TAGS``) with ``git grep``/``git cat-file``, never a work tree, and writes
one CSV row per distinct message pattern: every ``NV_PRINTF(LEVEL_ERROR|LEVEL_WARNING, ...)``,
``NV_PRINTF_EX(module, LEVEL_..., ...)``, ``nv_printf(NV_DBG_ERRORS|NV_DBG_WARNINGS, ...)`` and
``NV_DEV_PRINTF[_STATUS](NV_DBG_..., nv, ...)`` call whose format is a string literal. Each row is the format
string as the driver prints it (its first line), the pattern that recognises it in a kernel log, its level, the
component (from its path), the family it belongs to (``families.py``), and where it comes from: the first and last
pinned tag holding it and its file:line at the newest of them. The strings are facts the driver prints, each cited
to its file; no code is copied. Coverage (calls found per tag, rows made, what was dropped and why) goes to stderr.

Standard library only: run it by hand or with ``make mine CHECKOUT=PATH``.
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from families import family_of  # noqa: E402  (beside this file; the miner is a script, not a package)

REPOSITORY = "NVIDIA/open-gpu-kernel-modules"
# Every release tag of the repository as of the mining (515.43.04 to 595.45.04, oldest first, ``git tag | sort -V``):
# a row's first and last tag are exact. Reading all takes a few minutes (a file unchanged between tags is parsed
# once); ``--tags`` reads fewer. A new release is mined by adding its tag here.
TAGS = (
    "515.43.04", "515.48.07", "515.49.05", "515.49.06", "515.49.10", "515.49.14", "515.49.15", "515.49.18",
    "515.49.19", "515.49.24", "515.49.25", "515.57", "515.65.01", "515.65.07", "515.76", "515.86.01", "515.105.01",
    "520.56.06", "520.61.05", "520.61.07",
    "525.47.04", "525.47.06", "525.47.07", "525.47.11", "525.47.13", "525.47.14", "525.47.15", "525.47.18",
    "525.47.22", "525.47.24", "525.47.26", "525.47.27", "525.47.31", "525.47.34", "525.47.35", "525.53", "525.60.11",
    "525.60.13", "525.78.01", "525.85.05", "525.85.12", "525.89.02", "525.105.17", "525.116.03", "525.116.04",
    "525.125.06", "525.147.05",
    "530.30.02", "530.41.03",
    "535.43.02", "535.43.08", "535.43.09", "535.43.10", "535.43.11", "535.43.13", "535.43.15", "535.43.16",
    "535.43.19", "535.43.20", "535.43.22", "535.43.23", "535.43.24", "535.43.25", "535.43.28", "535.54.03",
    "535.86.05", "535.86.10", "535.98", "535.104.05", "535.104.12", "535.113.01", "535.129.03", "535.146.02",
    "535.154.05", "535.161.07", "535.161.08", "535.171.04", "535.179", "535.183.01", "535.183.06", "535.216.01",
    "535.216.03", "535.230.02", "535.247.01", "535.261.03", "535.274.02", "535.288.01",
    "545.23.06", "545.23.08", "545.29.02", "545.29.03", "545.29.06",
    "550.40.07", "550.40.53", "550.40.55", "550.40.59", "550.40.61", "550.40.63", "550.40.65", "550.40.67",
    "550.40.70", "550.40.71", "550.40.75", "550.40.76", "550.40.79", "550.40.80", "550.40.81", "550.40.82",
    "550.40.83", "550.40.85", "550.54.14", "550.54.15", "550.67", "550.76", "550.78", "550.90.07", "550.90.12",
    "550.100", "550.107.02", "550.120", "550.127.05", "550.127.08", "550.135", "550.142", "550.144.03", "550.163.01",
    "555.42.02", "555.42.06", "555.52.04", "555.58", "555.58.02",
    "560.28.03", "560.31.02", "560.35.03",
    "565.57.01", "565.77",
    "570.86.15", "570.86.16", "570.123.01", "570.123.06", "570.123.07", "570.123.10", "570.123.11", "570.123.14",
    "570.123.18", "570.123.19", "570.124.04", "570.124.06", "570.133.07", "570.133.20", "570.144", "570.148.08",
    "570.153.02", "570.158.01", "570.169", "570.172.08", "570.181", "570.190", "570.195.03", "570.207", "570.211.01",
    "575.51.02", "575.51.03", "575.57.08", "575.64", "575.64.03", "575.64.05",
    "580.65.06", "580.76.05", "580.82.07", "580.82.09", "580.94.02", "580.94.03", "580.94.06", "580.94.10",
    "580.94.11", "580.94.13", "580.94.16", "580.94.17", "580.94.18", "580.95.05", "580.105.08", "580.119.02",
    "580.126.09", "580.126.16", "580.126.18", "580.126.20", "580.142",
    "590.44.01", "590.48.01",
    "595.44.02", "595.44.03", "595.45.04",
)

# The printing calls: (first argument index of the level, index of the format, prefix the macro prints,
# suffix it appends). NV_PRINTF prints "NVRM: <function>: " before the format (nvprintf.h NV_PRINTF_ADD_PREFIX,
# nvlog_printf.c); NV_DEV_PRINTF prints "NVRM: GPU dddd:bb:dd.f: " (os-interface.h); _STATUS appends " (0x%x)".
CALLS = {
    "NV_PRINTF": (0, 1, "", ""),
    "NV_PRINTF_EX": (1, 2, "", ""),
    "nv_printf": (0, 1, "", ""),
    "NV_DEV_PRINTF": (0, 2, "GPU %04x:%02x:%02x.%x: ", ""),
    "NV_DEV_PRINTF_STATUS": (0, 3, "GPU %04x:%02x:%02x.%x: ", " (0x%x)"),
}
_CALL = re.compile(r"\b(" + "|".join(sorted(CALLS, key=len, reverse=True)) + r")\s*\(")
_GREP = r"\b(NV_PRINTF(_EX)?|nv_printf|NV_DEV_PRINTF(_STATUS)?)\s*\("
LEVELS = {"LEVEL_ERROR": "error", "LEVEL_WARNING": "warning", "NV_DBG_ERRORS": "error", "NV_DBG_WARNINGS": "warning"}
OTHER_LEVELS = re.compile(r"LEVEL_(INFO|NOTICE|SILENT|FATAL)|NV_DBG_(INFO|SETUP|USERERRORS|MEMINFO)")
# Format macros the driver concatenates with its literals (nvtypes.h, os-interface.h).
MACROS = {
    "NvU64_fmtx": "llx", "NvU64_fmtX": "llX", "NvU64_fmtu": "llu", "NvU64_fmto": "llo", "NvS64_fmtd": "lld",
    "NvS64_fmti": "lli", "NvP64_fmt": "%p", "NV_PCI_DEV_FMT": "%04x:%02x:%02x.%x",
    "NVLINK_PCI_DEV_FMT": "%04x:%02x:%02x.%x",
}
_SPEC = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?(hh|h|ll|l|z|j|t|L|q|I64)?([diouxXeEfgGcsp%])")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.S)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
# Fixed text between conversions is joined with _JOIN; an index word is a whole word of it that no conversion
# touches ("offset%x" prints "offset0x1f": not the word "offset"), so the same word is whole in every line printed.
_JOIN = "\x01"
_WHOLE_WORD = re.compile(r"(?<![\w\x01])[A-Za-z][A-Za-z0-9_]{3,}(?![\w\x01])")
MIN_LITERAL = 12  # letters and digits of fixed text a format needs to be recognised on its own


@dataclass
class Call:
    path: str
    line: int
    level: str
    fmt: str  # one line of the format as printed (C escapes decoded, the macro's prefix/suffix applied, NVRM tag off)
    whole: str = ""  # every line of the format, joined: what the family is chosen by (a line may be a fragment)


@dataclass
class Row:
    pattern: str
    fmt: str
    level: str
    path: str
    line: int
    whole: str
    tags: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- reading C source

def _skip_string(text: str, i: int, quote: str) -> int:
    i += 1
    while i < len(text) and text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def call_arguments(text: str, start: int) -> list[str] | None:
    """The top-level arguments of the call whose "(" is at ``start`` (comments and preprocessor lines removed)."""
    depth, i, args, current = 0, start, [], []
    while i < len(text):
        c = text[i]
        if c in "\"'":
            end = _skip_string(text, i, c)
            current.append(text[i:end])
            i = end
            continue
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i == -1 else i
            continue
        if text.startswith("/*", i):
            i = text.find("*/", i)
            i = len(text) if i == -1 else i + 2
            continue
        if c == "\n" and text[i + 1:].lstrip(" \t").startswith("#"):  # an #if inside the call: drop the line
            i = text.find("\n", i + 1)
            i = len(text) if i == -1 else i
            continue
        if c in "([{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return args
        elif c == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    return None


def _unescape(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        simple = {"n": "\n", "t": "\t", "r": "", "\\": "\\", '"': '"', "'": "'", "a": "", "0": ""}
        if e in simple:
            return simple[e]
        if e[0] == "x":
            return chr(int(e[1:], 16))
        if e[0] in "01234567":
            return chr(int(e, 8))
        return e

    return _ESCAPE.sub(one, body)


_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_]\w*))', re.S)


def format_literal(arg: str) -> tuple[str | None, str]:
    """The format argument's text (string literals concatenated, format macros expanded), or (None, why)."""
    pieces, i = [], 0
    arg = arg.strip()
    if not arg.startswith('"') and arg.split('"')[0].strip() not in MACROS:
        return None, "format is not a string literal"
    while i < len(arg):
        m = _TOKEN.match(arg, i)
        if m is None:
            if arg[i:].strip():
                return None, "format is not a plain concatenation of literals"
            break
        if m.group(1) is not None:
            pieces.append(_unescape(m.group(1)))
        elif m.group(2) in MACROS:
            pieces.append(MACROS[m.group(2)])
        else:
            pieces.append("%s")  # another macro: its text is unknown here, matched as a bounded wildcard
        i = m.end()
    return "".join(pieces), ""


def calls_in(path: str, text: str) -> tuple[list[Call], collections.Counter[str]]:
    """The error/warning printing calls of one file, and why others were left out."""
    found, dropped = [], collections.Counter()
    for m in _CALL.finditer(text):
        name = m.group(1)
        before = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if before.lstrip().startswith("#"):
            continue  # a macro definition
        args = call_arguments(text, m.end() - 1)
        level_at, fmt_at, prefix, suffix = CALLS[name]
        if args is None or len(args) <= fmt_at:
            dropped["call could not be read"] += 1
            continue
        level = LEVELS.get(args[level_at].strip())
        if level is None:
            if not OTHER_LEVELS.search(args[level_at]):
                dropped["level is not a constant"] += 1
            continue
        fmt, why = format_literal(args[fmt_at])
        if fmt is None:
            dropped[why] += 1
            continue
        fmt = prefix + fmt + suffix if not suffix else prefix + fmt.rstrip("\n") + suffix
        line = text.count("\n", 0, m.start()) + 1
        first, *more = fmt.split("\n")
        whole = " ".join(_untagged(part) for part in (first, *more) if part.strip())
        found.append(Call(path, line, level, _untagged(first), whole))
        # a later line of the format that starts with its own NVRM tag is a kernel log line of its own (nv.c's
        # multi-line messages); one without the tag continues the line before and is not read on its own
        found += [Call(path, line, level, _untagged(part), whole) for part in more if part.startswith("NVRM:")]
    return found, dropped


def _untagged(line: str) -> str:
    return line.removeprefix("NVRM: ").removeprefix("NVRM:").strip(" ").rstrip()


# --------------------------------------------------------------------------- format -> pattern

def _spec_piece(m: re.Match[str]) -> str:
    flags, width, _, _, conv = m.groups()
    pad = r" {0,20}" if width and "0" not in flags and "-" not in flags else ""
    piece = {"d": r"[-+]?\d{1,20}", "i": r"[-+]?\d{1,20}", "u": r"\d{1,20}", "o": r"[0-7]{1,22}",
             "x": r"(?:0x)?[0-9a-fA-F]{1,16}", "X": r"(?:0x)?[0-9a-fA-F]{1,16}", "c": r".?",
             "s": r".{0,200}?", "p": r"[\w()]{1,24}", "%": "%"}.get(conv, r"[-+0-9.eEinfa]{1,40}")
    return pad + piece


def pattern_of(fmt: str) -> tuple[str, str]:
    """(regular expression, fixed text) of a format: fixed text escaped, whitespace runs as \\s+, each
    conversion a bounded piece; anchored at the end (the message ends the kernel log line)."""
    parts, literal, at = [], [], 0
    for m in _SPEC.finditer(fmt):
        parts.append(_literal(fmt[at:m.start()]))
        literal.append(fmt[at:m.start()])
        parts.append(_spec_piece(m))
        at = m.end()
    parts.append(_literal(fmt[at:]))
    literal.append(fmt[at:])
    return "".join(parts).strip() + r"\s*$", _JOIN.join(literal)


def _literal(text: str) -> str:
    return r"\s+".join(re.escape(word) for word in re.split(r"\s+", text)) if text.strip() else (
        r"\s*" if text else "")


def example_of(fmt: str) -> str:
    """A line the driver could print from this format: %d as 1, %x as 1f, %s as x, %p as 0x1f."""
    fill = {"d": "1", "i": "1", "u": "1", "o": "1", "x": "1f", "X": "1F", "c": "c", "s": "x", "p": "0x1f", "%": "%"}
    return _SPEC.sub(lambda m: fill.get(m.group(5), "1.5"), fmt)


def why_dropped(fmt: str, literal: str) -> str | None:
    if not fmt.strip():
        return "empty line"
    if sum(c.isalnum() for c in literal) < MIN_LITERAL or not _WORD.search(literal):
        return "too little fixed text to recognise"
    if not _WHOLE_WORD.search(literal):
        return "no whole word to index it by"
    return None


# --------------------------------------------------------------------------- git

class Git:
    def __init__(self, checkout: str) -> None:
        self.base = ["git", "--git-dir", self._git_dir(checkout)]
        self._cat = None

    @staticmethod
    def _git_dir(checkout: str) -> str:
        dot = os.path.join(checkout, ".git")
        return dot if os.path.exists(dot) else checkout

    def run(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], check=True, capture_output=True, text=True,
                              errors="replace").stdout

    def files_with_calls(self, tag: str) -> dict[str, str]:
        """path -> blob id of the C files at ``tag`` that call a printing function."""
        listed = self.run("grep", "-l", "-E", _GREP, tag, "--", "*.c", "*.h", "*.cpp")
        paths = [line.split(":", 1)[1] for line in listed.splitlines() if ":" in line]
        blobs = {}
        for chunk in range(0, len(paths), 500):
            for line in self.run("ls-tree", tag, "--", *paths[chunk:chunk + 500]).splitlines():
                meta, path = line.split("\t", 1)
                blobs[path] = meta.split()[2]
        return blobs

    def blob(self, sha: str) -> str:
        if self._cat is None:
            self._cat = subprocess.Popen([*self.base, "cat-file", "--batch"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE)
        self._cat.stdin.write(sha.encode() + b"\n")
        self._cat.stdin.flush()
        header = self._cat.stdout.readline().split()
        data = self._cat.stdout.read(int(header[2]) + 1)[:-1]
        return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------- component

def component_of(path: str) -> str:
    """Where in the driver a file is: kernel-open/nvidia/nv.c -> nv, src/nvidia/src/kernel/gpu/gsp/... -> gsp."""
    parts = path.split("/")
    if parts[0] == "kernel-open" and len(parts) > 2:
        module = parts[1]
        return {"nvidia": "nv", "nvidia-uvm": "uvm", "nvidia-drm": "drm", "nvidia-modeset": "modeset",
                "nvidia-peermem": "peermem", "common": "nv-common"}.get(module, module)
    if parts[:2] == ["src", "nvidia"] and len(parts) > 4 and parts[2] in ("src", "inc"):
        if parts[3] == "kernel":
            rest = parts[4:-1]
            if rest and rest[0] == "gpu" and len(rest) > 1:
                return rest[1]
            return rest[0] if rest else "kernel"
        return parts[4] if parts[3] == "libraries" and len(parts) > 5 else parts[3]
    if parts[:3] == ["src", "nvidia", "generated"]:
        return "generated"  # NVOC's generated code (RPC and control dispatch)
    if parts[:3] == ["src", "nvidia", "arch"]:
        return "unix"  # the OS layer of RM: osinit.c (RmInitAdapter), os.c ...
    if parts[:2] == ["src", "nvidia-modeset"]:
        return "modeset"
    if parts[0] == "src" and len(parts) > 2:
        return parts[1] if parts[1] != "common" else parts[2]
    return parts[0]


# --------------------------------------------------------------------------- mining

def mine(git: Git, tags: tuple[str, ...], log: io.TextIOBase) -> tuple[list[Row], dict]:
    parsed: dict[str, tuple[list[Call], collections.Counter[str]]] = {}  # blob id -> its calls
    rows: dict[str, Row] = {}
    coverage = {}
    for tag in tags:
        calls, dropped = [], collections.Counter()
        for path, sha in sorted(git.files_with_calls(tag).items()):
            if sha not in parsed:
                parsed[sha] = calls_in(path, git.blob(sha))
            found, why = parsed[sha]
            calls += [Call(path, c.line, c.level, c.fmt, c.whole) for c in found]
            dropped.update(why)
        made = 0
        for call in calls:
            pattern, literal = pattern_of(call.fmt)
            why = why_dropped(call.fmt, literal)
            if why:
                dropped[why] += 1
                continue
            made += 1
            row = rows.get(pattern)
            if row is None:
                row = rows[pattern] = Row(pattern, call.fmt, call.level, call.path, call.line, call.whole)
            elif call.level == "error" and row.level != "error":
                row.level = "error"  # printed at both levels: the stronger one
            if not row.tags or row.tags[-1] != tag:
                row.tags.append(tag)
            if row.tags[-1] == tag:
                row.path, row.line, row.whole = call.path, call.line, call.whole  # its place at the newest tag
        levels = collections.Counter(c.level for c in calls)
        coverage[tag] = (len(calls), levels, made, dropped)
        print(f"{tag}: {len(calls)} error/warning format lines read ({levels['error']} error, "
              f"{levels['warning']} warning), {made} turned into patterns; dropped: "
              + (", ".join(f"{n} {why}" for why, n in dropped.most_common()) or "none"), file=log)
    return list(rows.values()), coverage


def rarest_word(literal: str, counts: collections.Counter[str]) -> str:
    """The index key of a row: its fixed word that fewest rows share (the longest of those)."""
    words = {w.lower() for w in _WHOLE_WORD.findall(literal)}
    return min(words, key=lambda w: (counts[w], -len(w), w))


# One row per physical line, the first five columns never quoted: the runtime indexes the file by splitting each
# line at its first five commas (knowledge/mined.py) and parses only the rows it tries.
COLUMNS = ("id", "level", "component", "family", "key", "fixed_chars", "format", "pattern", "repository", "file",
           "line", "first_tag", "last_tag", "tags")


def table(rows: list[Row], tags: tuple[str, ...]) -> str:
    counts = collections.Counter(w for r in rows
                                 for w in {w.lower() for w in _WHOLE_WORD.findall(pattern_of(r.fmt)[1])})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    order = {tag: i for i, tag in enumerate(tags)}
    for row in sorted(rows, key=lambda r: (r.path, r.line, r.pattern)):
        literal = pattern_of(row.fmt)[1]
        component = component_of(row.path)
        ident = "nvrm-" + hashlib.sha1(row.pattern.encode()).hexdigest()[:10]
        first, last = min(row.tags, key=order.get), max(row.tags, key=order.get)
        writer.writerow((ident, row.level, component, family_of(component, row.path, row.whole),
                         rarest_word(literal, counts), sum(c.isalnum() for c in literal), row.fmt, row.pattern,
                         REPOSITORY, row.path, row.line, first, last, len(row.tags)))
    return out.getvalue()


def write_out(text: str, out: str) -> None:
    """Write a mined table to ``out`` ('-': standard output), as is (the CSV writer already chose the newlines)."""
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)


def main(argv: list[str] | None = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "src", "gpuhealth", "knowledge", "mined", "nvrm.csv")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", required=True, help="a clone or bare git directory of " + REPOSITORY)
    parser.add_argument("--out", default=default_out, help="the CSV to write ('-': standard output)")
    parser.add_argument("--tags", nargs="*", default=list(TAGS), help="tags to read, oldest first")
    args = parser.parse_args(argv)
    git = Git(args.checkout)
    tags = tuple(args.tags)
    missing = [t for t in tags if not git.run("tag", "-l", t).strip()]
    if missing:
        print(f"mine_nvrm: {args.checkout}: tags missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    rows, coverage = mine(git, tags, sys.stderr)
    text = table(rows, tags)
    levels = collections.Counter(r.level for r in rows)
    print(f"{len(rows)} distinct patterns ({levels['error']} error, {levels['warning']} warning) "
          f"from {len(tags)} tags of {REPOSITORY}", file=sys.stderr)
    write_out(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
