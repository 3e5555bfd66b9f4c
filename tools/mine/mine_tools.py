"""Mine the error and warning messages of NVIDIA's container toolkit and driver installer from git checkouts.

    nice -n 10 python3 tools/mine/mine_tools.py --checkouts DIR [--out src/gpuhealth/knowledge/mined/tools.csv]

DIR holds one clone (or bare git directory) per source, named as the repository (``DIR/nvidia-container-toolkit``,
``DIR/nvidia-installer``, ``DIR/libnvidia-container``), each with its release tags. The miner reads the pinned tags
(``SOURCES``) with ``git grep``/``git cat-file``, never a work tree, and writes one CSV row per distinct message
pattern:

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

- NVIDIA/k8s-device-plugin and the GPU operator's validator (NVIDIA/gpu-operator ``validator/``,
  ``cmd/nvidia-validator/``, ``internal/validator/``), Go: as the toolkit, and klog's ``Error``/``ErrorS``/``Warning``.
- NVIDIA/mig-parted (``nvidia-mig-parted`` and the GPU operator's ``nvidia-mig-manager``), Go with logrus: as the
  device plugin.
- NVIDIA/libnvidia-container (C): the ``error_set*`` formats (the message after ``nvidia-container-cli: <stage>
  error: ``), the debug log's ``log_err``/``log_warn`` and the command's ``warn``/``warnx``/``errx``. Its repository
  could not be cloned where the table was made: its files are pinned one by one to the commit they were read at
  (``LIBNVIDIA_CONTAINER_PINS``), read from a clone holding those commits or from a folder laid out as the
  repository (``DIR/libnvidia-container/src/...``). A row's tag range is then its file's commit.

Standard library only: run it by hand or with ``make mine-tools CHECKOUTS=DIR``.
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
    write_out,
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
    # A source read file by file: (path, commit) each, instead of tags (see LIBNVIDIA_CONTAINER_PINS).
    pins: tuple[tuple[str, str], ...] = ()
    format_index: tuple[tuple[str, int], ...] = ()  # calls whose format is not at ``format_at``
    min_fixed: int = 16  # letters and digits of fixed text a message needs (MIN_FIXED)
    min_words: int = 3
    anchored_cause: bool = False  # True: a trailing ": %s" (the wrapped error) is cut, as for Go
    partial: tuple[tuple[str, int], ...] = ()  # pinned files read only in part: (path, how many first lines)
    # True: the program prints its error capitalised (nvidia-mig-parted's main: logrus Fatal of the error with its first
    # letter upper-cased), so a pattern's first letter matches either case
    capitalised: bool = False


# NVIDIA/libnvidia-container could not be brought here whole (its snapshot with history is 3 GB); its files were read
# one by one, each at the commit the index held it at (no release tag: a tag range is not known for these rows).
# A clone holding these commits is read with git; a folder laid out as the repository is read as plain files.
# driver.c was read in part: its first 154 lines (the NVML call macro and its initialisation), not its queries.
LIBNVIDIA_CONTAINER_PINS = (
    ("src/cli/common.c", "2e347c194079961526befcfb9d77d4aed7410afc"),
    ("src/cli/dsl.c", "61bfaf38ca40edbe91bf20f52623f78e729e87d5"),
    ("src/cli/info.c", "5decca393a6635d9d599167b27a6072d8de9fc2f"),
    ("src/driver.c", "947344949f269687466e11e9a80f766ffffcb488"),
    ("src/nvc.c", "f35f091c6261496cef48f408dffa84c68e49e199"),
    ("src/rpc.c", "ebd35677ac897ffe1cded5aed31c283c4e796391"),
    ("src/rpc.h", "f81d6a58e0aab0772ff697ee26b5a56bf24fdc4b"),
    ("src/xfuncs.h", "ad1f8c8ac4a31bef69c82958f3a87456ceaa39c8"),
    ("src/utils.c", "077f498c209832bc545e2ece46c3a2b7d1ed1e4c"),
    ("src/nvc_ldcache.c", "0f8e13d6627d3ccb45f49cf5d4b9c4103b3a8d01"),
    ("src/cgroup.c", "02c1d95f0777a758356126b60a9c7e0954028e0d"),
)


KLOG_CALLS = {"fmt.Errorf": "error", "errors.New": "error", "Errorf": "error", "Error": "error", "ErrorS": "error",
              "Fatalf": "error", "Warningf": "warning", "Warning": "warning", "Warnf": "warning"}
SOURCES = {
    "nvidia-container-toolkit": Source(
        "NVIDIA/nvidia-container-toolkit", "go",
        {"fmt.Errorf": "error", "errors.New": "error", "Errorf": "error", "Warningf": "warning", "Warnf": "warning"},
        0, ("cmd", "internal", "pkg", ":!*vendor/*", ":!*_test.go"),
        ("v1.10.0", "v1.12.1", "v1.14.6", "v1.16.2", "v1.17.8", "v1.18.2", "v1.19.1")),
    "nvidia-installer": Source(
        "NVIDIA/nvidia-installer", "c", {"ui_error": "error", "ui_warn": "warning"}, 1, (),
        ("470.256.02", "525.147.05", "535.216.01", "550.144.03", "570.207", "580.119.02", "590.48.01")),
    # The library's error_set* formats (the text nvc_error() returns, after "nvidia-container-cli: <stage> error: "),
    # its debug log's log_err/log_warn, and the command's own warn/warnx/errx. Its messages are short ("nvml error",
    # "open failed"), so less fixed text is needed; a row is read only on a line naming nvidia-container-cli.
    "libnvidia-container": Source(
        "NVIDIA/libnvidia-container", "c",
        {"error_set": "error", "error_setx": "error", "error_set_dl": "error", "error_set_elf": "error",
         "error_set_rpc": "error", "error_set_nvml": "error", "log_err": "error", "log_errf": "error",
         "log_warn": "warning", "log_warnf": "warning", "warnx": "error", "warn": "error", "errx": "error"},
        1, (), (), LIBNVIDIA_CONTAINER_PINS,
        (("error_set_rpc", 2), ("error_set_nvml", 3), ("log_err", 0), ("log_errf", 0), ("log_warn", 0),
         ("log_warnf", 0), ("warnx", 0), ("warn", 0)),
        min_fixed=8, min_words=2, anchored_cause=True, partial=(("src/driver.c", 154),)),
    # Kubernetes: the device plugin (and gpu-feature-discovery, the MPS daemon ... in its cmd/) and the GPU operator's
    # validator, Go: fmt.Errorf/errors.New as the toolkit, and klog's Error/Warning calls (ErrorS: its message is the
    # second argument). Their lines are read only with klog's prefix or a name of the programs on them.
    "k8s-device-plugin": Source(
        "NVIDIA/k8s-device-plugin", "go", KLOG_CALLS,
        0, ("cmd", "internal", "api", ":!*vendor/*", ":!*_test.go"),
        ("v0.14.5", "v0.15.1", "v0.16.2", "v0.17.4", "v0.18.2", "v0.19.3", "v0.20.0"), format_index=(("ErrorS", 1),)),
    "gpu-operator": Source(
        "NVIDIA/gpu-operator", "go", KLOG_CALLS,
        0, ("validator", "cmd/nvidia-validator", "internal/validator", ":!*vendor/*", ":!*_test.go"),
        ("v23.9.2", "v24.9.2", "v25.3.4", "v25.10.1", "v26.3.3", "v26.7.0"), format_index=(("ErrorS", 1),)),
    # nvidia-mig-parted (the MIG partition editor) and nvidia-mig-manager (the GPU operator's MIG manager, which runs
    # it), Go with logrus: fmt.Errorf/errors.New and the logger's calls. Its command prints the wrapped chain once,
    # capitalised, through logrus' Fatal ("FATA[0000] Error applying MIG configuration with hooks: error resetting all
    # GPUs: exit status 255"), after the output of the nvidia-smi it ran (the GPU reset's refusal).
    "mig-parted": Source(
        "NVIDIA/mig-parted", "go", KLOG_CALLS,
        0, ("cmd", "internal", "pkg", "api", ":!*vendor/*", ":!*_test.go"),
        ("v0.5.5", "v0.6.0", "v0.8.0", "v0.10.0", "v0.12.3", "v0.13.1", "v0.14.5", "v0.15.0"), capitalised=True),
}

_GO_METHODS_WITHOUT_ARGS = frozenset({"Error", "Warning"})  # err.Error() is a method call, not a logger's


def _go_call(source: Source) -> re.Pattern[str]:
    """A package function (``fmt.Errorf``) or a method of any receiver (a logger's ``.Errorf``)."""
    qualified = "|".join(map(re.escape, sorted((n for n in source.calls if "." in n), key=len, reverse=True)))
    methods = "|".join(sorted((n for n in source.calls if "." not in n), key=len, reverse=True))
    return re.compile(rf"\b(?P<call>{qualified})\s*\(|\.(?P<method>{methods})\s*\(")
_PRI_MACRO = re.compile(r'"\s*PRI([diouxX])(?:8|16|32|64|MAX|PTR)\b\s*("?)')  # "...%"PRId32"..." -> "...%d..."


def _c_call(source: Source) -> re.Pattern[str]:
    names = "|".join(sorted(map(re.escape, source.calls), key=len, reverse=True))
    return re.compile(rf"\b(?P<call>{names})\s*\(")
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
    finder = _go_call(source) if source.language == "go" else _c_call(source)
    at = dict(source.format_index)
    for m in finder.finditer(text):
        name = m.group("call") or m.group("method")
        index = at.get(name, source.format_at)
        args = call_arguments(text, m.end() - 1)
        if name in _GO_METHODS_WITHOUT_ARGS and not any(a.strip() for a in args or ()):
            continue
        if not args or len(args) <= index:
            dropped["call could not be read"] += 1
            continue
        read = _go_literal if source.language == "go" else _c_literal
        fmt = read(_PRI_MACRO.sub(lambda p: p.group(1) + ("" if p.group(2) else '"'), args[index]))
        if fmt is None:
            dropped["format is not a string literal"] += 1
            continue
        level = source.calls[name]
        found.append((text.count("\n", 0, m.start()) + 1, level, fmt))
    return found, dropped


def shown_format(source: Source, fmt: str) -> str:
    """The part of a format a pasted line shows on its own: its first line; for Go, without the wrapped cause at
    its end; for the installer, its first ``WRAP`` characters to a word's end."""
    fmt = fmt.strip().split("\n")[0].strip()
    if source.language == "go" or source.anchored_cause:
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
    if name == "libnvidia-container":
        return "nvidia-container-cli" if path.startswith("src/cli/") else "libnvidia-container"
    if name == "gpu-operator":
        return "nvidia-validator"
    if name == "mig-parted":
        parts = path.split("/")
        return parts[1] if parts[0] == "cmd" and len(parts) > 2 else "mig-parted-" + (
            parts[-2] if len(parts) > 2 else parts[0])
    if name == "k8s-device-plugin":
        parts = path.split("/")
        return parts[1] if parts[0] == "cmd" and len(parts) > 2 else "device-plugin-" + (
            parts[1] if len(parts) > 2 else parts[0])
    parts = path.split("/")
    if parts[0] == "cmd" and len(parts) > 2:
        return parts[1]
    return "toolkit-" + (parts[1] if len(parts) > 2 else parts[0])


def _reason(source: Source, shown: str, literal: str) -> str | None:
    """Why a format is not a row (None: it is one). A source that sets its own minimum (libnvidia-container's
    messages are short, and its rows need the program's name on the line) is not held to the driver's."""
    if source.min_fixed == MIN_FIXED:
        reason = why_dropped(shown, literal)
    else:
        reason = ("empty line" if not shown.strip() else
                  "no whole word to index it by" if not _WHOLE_WORD.search(literal) else None)
    if reason is None and (sum(c.isalnum() for c in literal) < source.min_fixed
                           or len(_FIXED_WORDS.findall(literal)) < source.min_words):
        reason = f"fewer than {source.min_words} words or {source.min_fixed} letters of fixed text"
    return reason


def _versions(source: Source, git: Git | None, checkout: str, log: io.TextIOBase):
    """(version, [(path, blob id or None, text or None)]) per pinned tag, or one entry per pinned file."""
    if not source.pins:
        for tag in source.tags:
            listed = git.run("ls-tree", "-r", tag, "--", *[p for p in source.paths if not p.startswith(":")])
            files = []
            for entry in listed.splitlines():
                meta, path = entry.split("\t", 1)
                if path.endswith(".go" if source.language == "go" else ".c") and "vendor/" not in path and \
                        not path.endswith("_test.go"):
                    files.append((path, meta.split()[2], None))
            yield tag, files
        return
    partial = dict(source.partial)
    for path, commit in source.pins:
        yield commit, [(path, None, read_pinned(checkout, path, commit, log, partial.get(path, 0)))]


def read_pinned(checkout: str, path: str, commit: str, log: io.TextIOBase, lines: int = 0) -> str:
    """A pinned file's text (its first ``lines`` lines when not 0: the part that was read): from a clone holding its
    commit, else the file in a folder laid out as the repository (what was saved from the commit when no clone could
    be made)."""
    text = None
    if os.path.exists(os.path.join(checkout, ".git")) or os.path.exists(os.path.join(checkout, "HEAD")):
        try:
            text = Git(checkout).run("cat-file", "blob", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            print(f"{path}: commit {commit[:12]} not in the clone: reading the work tree's file", file=log)
    if text is None:
        with open(os.path.join(checkout, path), encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    return "".join(text.splitlines(keepends=True)[:lines]) if lines else text


def mine(name: str, source: Source, git: Git | None, log: io.TextIOBase, checkout: str = "") -> list[Row]:
    rows: dict[str, Row] = {}
    parsed: dict[str, tuple[list, collections.Counter]] = {}
    for version, files in _versions(source, git, checkout, log):
        dropped, calls, kept = collections.Counter(), 0, 0
        for path, blob, text in files:
            key = blob or f"{version}:{path}"
            if key not in parsed:
                parsed[key] = calls_in(source, text if text is not None else git.blob(blob))
            found, why = parsed[key]
            dropped.update(why)
            for line, level, fmt in found:
                calls += 1
                shown = shown_format(source, fmt)
                pattern, literal = pattern_of(shown)
                reason = _reason(source, shown, literal)
                if reason:
                    dropped[reason] += 1
                    continue
                kept += 1
                pattern = pattern.removesuffix(r"\s*$")
                if source.capitalised and pattern[:1].islower():
                    pattern = f"[{pattern[0].upper()}{pattern[0]}]{pattern[1:]}"
                row = rows.setdefault(pattern, Row(pattern, shown, level, name, path, line,
                                                  " ".join(fmt.split())))
                if source.pins and row.path != path:
                    continue  # files read one by one: a message two files print is the first file's row
                if version not in row.tags:
                    row.tags.append(version)
                row.path, row.line = path, line  # the newest tag's place
        where = f"{files[0][0]} at {version[:12]}" if source.pins else version
        print(f"{name} {where}: {calls} calls read, {kept} kept"
              + "".join(f", {n} {why}" for why, n in dropped.most_common()), file=log)
    return list(rows.values())


# nvidia-container-cli's stage messages ("mount error: %s") hold the library's message (nvc_error()): a line shows
# both, and the inner message's row says more, so a stage row is written with the least fixed text (it ranks last).
_STAGE = re.compile(r"^[\w-]+ error: %s$")
ID_PREFIX = {"nvidia-container-toolkit": "ctk-", "nvidia-installer": "inst-", "libnvidia-container": "nvc-",
             "k8s-device-plugin": "k8s-", "gpu-operator": "gpuop-", "mig-parted": "mig-"}
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
        order = {tag: i for i, tag in enumerate(source.tags or [c for _, c in source.pins])}
        first, last = min(row.tags, key=order.get), max(row.tags, key=order.get)
        ident = ID_PREFIX[row.source] + hashlib.sha1(row.pattern.encode()).hexdigest()[:10]
        fixed = sum(c.isalnum() for c in literal.replace(_JOIN, ""))
        if row.source == "libnvidia-container" and _STAGE.match(row.whole):
            fixed = 1  # "initialization error: %s" wraps the library's message: the message's own row ranks first
        writer.writerow((ident, row.level, component, family_of(component, row.path, row.whole, TOOL_FAMILIES),
                         rarest_word(literal, counts), fixed,
                         row.fmt, row.pattern, source.repository, row.path, row.line, first, last, len(row.tags)))
    return out.getvalue()


def _in_clone(checkout: str, path: str, commit: str) -> bool:
    try:
        Git(checkout).run("cat-file", "-e", f"{commit}:{path}")
        return True
    except (subprocess.CalledProcessError, OSError):
        return False


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
        git = None if source.pins else Git(path)
        missing = [t for t in source.tags if not git.run("tag", "-l", t).strip()] if git else \
            [p for p, c in source.pins if not os.path.exists(os.path.join(path, p)) and not _in_clone(path, p, c)]
        if missing:
            print(f"mine_tools: {path}: {'tags' if git else 'files'} missing: {', '.join(missing)}", file=sys.stderr)
            return 2
        mined = mine(name, source, git, sys.stderr, path)
        levels = collections.Counter(r.level for r in mined)
        read = f"{len(source.tags)} tags" if git else f"{len(source.pins)} files at their pinned commits"
        print(f"{source.repository}: {len(mined)} distinct patterns ({levels['error']} error, "
              f"{levels['warning']} warning) from {read}", file=sys.stderr)
        rows += mined
    text = table(rows)
    write_out(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
