"""Mine the error and warning messages of NVIDIA's container toolkit and driver installer from git checkouts.

    nice -n 10 python3 tools/mine/mine_tools.py --checkouts DIR [--out src/gpuhealth/knowledge/mined/tools.csv]

DIR holds one clone (or bare git directory) per source, named as the repository (``DIR/nvidia-container-toolkit``,
``DIR/nvidia-installer``), each with its release tags. The miner reads the pinned tags (``SOURCES``) with
``git grep``/``git cat-file``, never a work tree, and writes one CSV row per distinct message pattern:

- NVIDIA/nvidia-container-toolkit (Go, ``cmd/``, ``internal/``, ``pkg/``; no ``vendor/``, no tests): the string
  literal given to ``fmt.Errorf``, ``errors.New`` and a logger's ``Errorf``/``Warningf``/``Warnf``. These are the
  messages that reach a user inside docker's or containerd's "OCI runtime create failed" line, wrapped in the
  messages of the callers (a pattern is searched anywhere in the line, not anchored).
- NVIDIA/nvidia-installer (C): the format given to ``ui_error`` (printed as "ERROR: ...") and ``ui_warn``
  ("WARNING: ..."). The installer wraps its messages at the terminal's width, so a pattern covers the format's
  first ``WRAP`` characters (to a word's end): the first printed line.

Each row: its format, the pattern, level, component (the program: ``nvidia-ctk``, ``nvidia-container-runtime``,
``nvidia-installer`` ...), family (``families.py`` over ``knowledge/mined_tool_families.csv``), index key, and where
it comes from (repository, first and last pinned tag holding it, file:line at the newest). The strings are facts the
software prints, each cited to its file; no code is copied. Coverage per source and tag goes to stderr.

NVIDIA/libnvidia-container (``nvidia-container-cli: ...``) is a source to add: ``SOURCES`` has no entry for it yet
(docs/mined-messages.md). Standard library only: run it by hand or with ``make mine-tools CHECKOUTS=DIR``.
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import io
import os
import re
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from families import family_of  # noqa: E402  (beside this file)
from mine_nvrm import (  # noqa: E402
    _JOIN,
    _SPEC,
    _WHOLE_WORD,
    Git,
    _unescape,
    call_arguments,
    pattern_of,
    rarest_word,
    why_dropped,
)

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL_FAMILIES = os.path.join(HERE, "..", "..", "src", "gpuhealth", "knowledge", "mined_tool_families.csv")
# A message is a row only with this much fixed text: shorter ones ("not supported", "invalid mode") are said by many
# programs, and a pasted line that holds them is no sign of the toolkit or installer.
MIN_FIXED, MIN_WORDS = 16, 3
_FIXED_WORDS = re.compile(r"[A-Za-z]{2,}")
WRAP = 60  # characters of an installer format a pattern covers: its first printed line (80 columns less "ERROR: ")


@dataclass(frozen=True)
class Source:
    repository: str
    language: str  # "go" or "c"
    calls: dict[str, str]  # call name (as written before "(") -> level
    format_at: int  # index of the format argument
    paths: tuple[str, ...]  # pathspecs read
    tags: tuple[str, ...]  # pinned tags, oldest first


SOURCES = {
    "nvidia-container-toolkit": Source(
        "NVIDIA/nvidia-container-toolkit", "go",
        {"fmt.Errorf": "error", "errors.New": "error", "Errorf": "error", "Warningf": "warning", "Warnf": "warning"},
        0, ("cmd", "internal", "pkg", ":!*vendor/*", ":!*_test.go"),
        ("v1.10.0", "v1.12.1", "v1.14.6", "v1.16.2", "v1.17.8", "v1.18.2", "v1.19.1")),
    "nvidia-installer": Source(
        "NVIDIA/nvidia-installer", "c", {"ui_error": "error", "ui_warn": "warning"}, 1, (),
        ("470.256.02", "525.147.05", "535.216.01", "550.144.03", "570.207", "580.119.02", "590.48.01")),
}

_GO_CALL = re.compile(r"\b(?P<call>fmt\.Errorf|errors\.New)\s*\(|\.(?P<method>Errorf|Warningf|Warnf)\s*\(")
_C_CALL = re.compile(r"\b(?P<call>ui_error|ui_warn)\s*\(")
_GO_VERB = re.compile(r"%[-+# 0]*\d*(?:\.\d+)?[vwqT]")  # Go's verbs C has not: matched as %s is
_GO_STRING = re.compile(r'\s*(?:"((?:[^"\\\n]|\\.)*)"|`([^`]*)`)\s*(?:\+|$)', re.S)
_C_STRING = re.compile(r'\s*"((?:[^"\\]|\\.)*)"', re.S)
_TRAILING_CAUSE = re.compile(r"(?::\s*|\s+)%s\s*$")  # "...: %w": the wrapped error the callee's own row names


@dataclass
class Row:
    pattern: str
    fmt: str
    level: str
    source: str
    path: str
    line: int
    whole: str  # the whole format: what the family is chosen by (a pattern may cover only its first line)
    tags: list[str] = field(default_factory=list)


def _go_literal(arg: str) -> str | None:
    pieces, i, arg = [], 0, arg.strip()
    while i < len(arg):
        m = _GO_STRING.match(arg, i)
        if m is None:
            return None
        pieces.append(_unescape(m.group(1)) if m.group(1) is not None else m.group(2))
        i = m.end()
    return "".join(pieces) if pieces else None


def _c_literal(arg: str) -> str | None:
    pieces, i, arg = [], 0, arg.strip()
    while i < len(arg):
        m = _C_STRING.match(arg, i)
        if m is None:
            return None if arg[i:].strip() else "".join(pieces)
        pieces.append(_unescape(m.group(1)))
        i = m.end()
    return "".join(pieces) if pieces else None


def calls_in(source: Source, text: str) -> tuple[list[tuple[int, str, str]], collections.Counter[str]]:
    """(line, level, format) of each error/warning call of one file, and why others were left out."""
    found, dropped = [], collections.Counter()
    finder = _GO_CALL if source.language == "go" else _C_CALL
    for m in finder.finditer(text):
        args = call_arguments(text, m.end() - 1)
        if not args or len(args) <= source.format_at:
            dropped["call could not be read"] += 1
            continue
        read = _go_literal if source.language == "go" else _c_literal
        fmt = read(args[source.format_at])
        if fmt is None:
            dropped["format is not a string literal"] += 1
            continue
        level = source.calls[m.group("call") or m.group("method")]
        found.append((text.count("\n", 0, m.start()) + 1, level, fmt))
    return found, dropped


def shown_format(source: Source, fmt: str) -> str:
    """The part of a format a pasted line shows on its own: its first line; for Go, without the wrapped cause at
    its end; for the installer, its first ``WRAP`` characters to a word's end."""
    fmt = fmt.strip().split("\n")[0].strip()
    if source.language == "go":
        fmt = _TRAILING_CAUSE.sub("", _GO_VERB.sub("%s", fmt)).rstrip(" :")
    elif len(fmt) > WRAP:
        cut = fmt.rfind(" ", 0, WRAP)
        fmt = fmt[:cut if cut > 0 else WRAP].rstrip(" ,:;(")
        spec = fmt.rfind("%")
        if spec >= 0 and not _SPEC.match(fmt, spec):
            fmt = fmt[:spec].rstrip()
    return fmt


def component_of(name: str, path: str) -> str:
    """The program a file belongs to: the toolkit's command directory, or the library part it is in."""
    if name == "nvidia-installer":
        return "nvidia-installer"
    parts = path.split("/")
    if parts[0] == "cmd" and len(parts) > 2:
        return parts[1]
    return "toolkit-" + (parts[1] if len(parts) > 2 else parts[0])


def mine(name: str, source: Source, git: Git, log: io.TextIOBase) -> list[Row]:
    rows: dict[str, Row] = {}
    parsed: dict[str, tuple[list, collections.Counter]] = {}
    for tag in source.tags:
        listed = git.run("ls-tree", "-r", tag, "--", *[p for p in source.paths if not p.startswith(":")])
        dropped, calls, kept = collections.Counter(), 0, 0
        for entry in listed.splitlines():
            meta, path = entry.split("\t", 1)
            if not path.endswith(".go" if source.language == "go" else ".c") or "vendor/" in path or \
                    path.endswith("_test.go"):
                continue
            blob = meta.split()[2]
            if blob not in parsed:
                parsed[blob] = calls_in(source, git.blob(blob))
            found, why = parsed[blob]
            dropped.update(why)
            for line, level, fmt in found:
                calls += 1
                shown = shown_format(source, fmt)
                pattern, literal = pattern_of(shown)
                reason = why_dropped(shown, literal) or (
                    "fewer than 3 words or 16 letters of fixed text"
                    if sum(c.isalnum() for c in literal) < MIN_FIXED or len(_FIXED_WORDS.findall(literal)) < MIN_WORDS
                    else None)
                if reason:
                    dropped[reason] += 1
                    continue
                kept += 1
                pattern = pattern.removesuffix(r"\s*$")
                row = rows.setdefault(pattern, Row(pattern, shown, level, name, path, line,
                                                  " ".join(fmt.split())))
                if tag not in row.tags:
                    row.tags.append(tag)
                row.path, row.line = path, line  # the newest tag's place
        print(f"{name} {tag}: {calls} calls read, {kept} kept"
              + "".join(f", {n} {why}" for why, n in dropped.most_common()), file=log)
    return list(rows.values())


COLUMNS = ("id", "level", "component", "family", "key", "fixed_chars", "format", "pattern", "repository", "file",
           "line", "first_tag", "last_tag", "tags")


def table(rows: list[Row]) -> str:
    counts = collections.Counter(w for r in rows for w in {w.lower() for w in
                                                           _WHOLE_WORD.findall(pattern_of(r.fmt)[1])})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in sorted(rows, key=lambda r: (r.source, r.path, r.line, r.pattern)):
        source = SOURCES[row.source]
        literal = pattern_of(row.fmt)[1]
        component = component_of(row.source, row.path)
        order = {tag: i for i, tag in enumerate(source.tags)}
        first, last = min(row.tags, key=order.get), max(row.tags, key=order.get)
        ident = ("ctk-" if row.source != "nvidia-installer" else "inst-") + \
            hashlib.sha1(row.pattern.encode()).hexdigest()[:10]
        writer.writerow((ident, row.level, component, family_of(component, row.path, row.whole, TOOL_FAMILIES),
                         rarest_word(literal, counts), sum(c.isalnum() for c in literal.replace(_JOIN, "")),
                         row.fmt, row.pattern, source.repository, row.path, row.line, first, last, len(row.tags)))
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    default_out = os.path.join(HERE, "..", "..", "src", "gpuhealth", "knowledge", "mined", "tools.csv")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkouts", required=True, help="a folder with a clone (or bare git dir) per source")
    parser.add_argument("--out", default=default_out, help="the CSV to write ('-': standard output)")
    args = parser.parse_args(argv)
    rows = []
    for name, source in SOURCES.items():
        path = os.path.join(args.checkouts, name)
        if not os.path.isdir(path):
            print(f"mine_tools: {path}: no checkout of {source.repository}", file=sys.stderr)
            return 2
        git = Git(path)
        missing = [t for t in source.tags if not git.run("tag", "-l", t).strip()]
        if missing:
            print(f"mine_tools: {path}: tags missing: {', '.join(missing)}", file=sys.stderr)
            return 2
        mined = mine(name, source, git, sys.stderr)
        levels = collections.Counter(r.level for r in mined)
        print(f"{source.repository}: {len(mined)} distinct patterns ({levels['error']} error, "
              f"{levels['warning']} warning) from {len(source.tags)} tags", file=sys.stderr)
        rows += mined
    text = table(rows)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
