"""Mine the documented error codes of the CUDA and NVML APIs and the error lines of NCCL and DCGM.

    nice -n 10 python3 tools/mine/mine_api.py --cuda-include DIR --nvml GIT --nccl GIT --dcgm GIT \
        [--out src/gpuhealth/knowledge/mined/api_errors.csv]

Sources (each optional: a source not given keeps the committed table's rows for it):
- ``--cuda-include``: a CUDA Toolkit's ``include/`` directory. ``cuda.h``'s ``CUresult`` enum (the driver API) and
  ``driver_types.h``'s ``cudaError`` enum (the runtime API): each value's name, number and documentation comment
  (the text NVIDIA's CUDA API reference is generated from).
- ``--nvml``: a clone of https://github.com/NVIDIA/go-nvml, which vendors NVIDIA's ``nvml.h``: its ``nvmlReturn_t``
  codes (``NVML_ERROR_*``) with their numbers and documentation comments, at ``NVML_TAGS``; a row also matches the
  exception name nvidia-ml-py's pynvml raises for the code (``NVMLError_LibRmVersionMismatch``).
- ``--nccl``: a clone (or bare git directory) of https://github.com/NVIDIA/nccl: every ``WARN("...")`` format string
  under ``src/`` at the pinned tags ``NCCL_TAGS`` (NCCL prints them as ``... NCCL WARN <message>``).
- ``--dcgm``: a clone of https://github.com/NVIDIA/DCGM: ``dcgmlib/dcgm_errors.h``'s ``DCGM_FR_*`` failure codes,
  their ``_MSG`` message and ``_NEXT`` suggested action at ``DCGM_TAGS``.
- ``--pytorch``: the messages PyTorch raises and warns when CUDA does not work for it.
  Its Python files are read at the release tags ``PYTORCH_TAGS``, in the functions ``PYTORCH_FUNCTIONS`` names
  (``torch/cuda/__init__.py``: CUDA initialisation and the GPU's architecture; ``torch/utils/cpp_extension.py``:
  the CUDA toolkit an extension is built with): what they raise, what they ``warnings.warn``, and each line of a
  message template they raise or warn (``CUDA_MISMATCH_MESSAGE.format(...)``, ``old_gpu_warn % (...)``), its
  ``{}``/``%d`` fields read as values. They come from a clone of https://github.com/pytorch/pytorch with those tags,
  or from the torch wheels of those versions in ``DIR/wheels/`` (a wheel holds these files as the tag has them;
  ``pip download --no-deps --only-binary=:all: --platform macosx_11_0_arm64 --python-version 3.10 torch==2.5.1``,
  64 MB, is the smallest), or from ``DIR/<tag>/<path>``.
  Its C++ files are not in a wheel and the repository is too large to clone here: ``c10/cuda/CUDAFunctions.cpp``
  (``TORCH_CHECK``/``TORCH_WARN`` messages, a non-literal piece read as ``%s``) is pinned to the commit it was read
  at (``PYTORCH_PINS``), only its first lines that were read, from the clone or ``DIR/<path>`` (a row's tag range is
  then that commit).

Each row: the API or library that reports it, the name (enum or NCCL's source file), its number, its documented
description or message, the pattern that recognises it in a log line, the check and cause it points to (from
``api_causes.csv``, hand-written and cited), and where it comes from (source, first and last tag, file:line at the
newest). The strings are facts the software prints or documents, each cited to its file; no code is copied.
Coverage goes to stderr. Standard library and ``git`` only.
"""

from __future__ import annotations

import argparse
import csv
import glob
import hashlib
import io
import os
import re
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mine_nvrm import Git, call_arguments, format_literal, pattern_of, why_dropped  # noqa: E402
from mine_tools import read_pinned  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
OUT = os.path.join(ROOT, "src", "gpuhealth", "knowledge", "mined", "api_errors.csv")
CAUSES = os.path.join(HERE, "api_causes.csv")
NCCL_TAGS = ("v2.18.6-1", "v2.21.5-1", "v2.24.3-1", "v2.27.7-1", "v2.30.7-1")
DCGM_TAGS = ("v3.3.9", "v4.6.0")
NVML_TAGS = ("v0.11.0-0", "v0.12.0-1", "v0.13.3-0")
# pytorch/pytorch's Python files at release tags, and in them the functions whose messages a user sees when CUDA does
# not work (the rest of torch/cuda/__init__.py is device queries, streams and storage: programming errors).
PYTORCH_TAGS = ("v1.13.0", "v2.0.0", "v2.2.0", "v2.4.0", "v2.5.1")
PYTORCH_FUNCTIONS = {
    "torch/cuda/__init__.py": ("_lazy_init", "_check_capability", "_check_cubins", "_raw_device_count_nvml",
                               "_get_pynvml_handler", "_exchange_device", "_maybe_exchange_device"),
    "torch/utils/cpp_extension.py": ("_check_cuda_version", "_join_cuda_home"),
}
# Its C++ files, read one by one from an index of GitHub (path, the commit it held, how many first lines were read: the
# CUDA initialisation code).
PYTORCH_PINS = (
    ("c10/cuda/CUDAFunctions.cpp", "68e217b9e71fcecbd34d831dd3e3e5a4ea9028fd", 125),
)
COLUMNS = ("id", "api", "name", "number", "key", "text", "pattern", "code", "symptom", "cause", "decides", "action",
           "source", "file", "line", "first_tag", "last_tag")
APIS = {"cuda-driver": "the CUDA driver API", "cuda-runtime": "the CUDA runtime API", "nvml": "NVML",
        "nccl": "NCCL", "dcgm": "DCGM", "pytorch": "PyTorch"}


# --------------------------------------------------------------------------- CUDA (documented enums)

_ENUM_VALUE = re.compile(r"/\*\*(?P<doc>(?:(?!\*/).)*)\*/\s*(?P<name>(?:CUDA_ERROR|cudaError)\w*)\s*=\s*(?P<num>\d+)",
                         re.S)


def _doc_text(doc: str) -> str:
    text = " ".join(line.strip().lstrip("*").strip() for line in doc.splitlines())
    text = re.sub(r"\\(?:deprecated|note|p|ref|c)\b\s*", "", text).replace("::", "")
    return re.sub(r"\s+", " ", text).strip()


def mine_cuda(include: str) -> list[dict]:
    rows = []
    version = re.search(r"#define CUDA_VERSION (\d+)", _read(os.path.join(include, "cuda.h")))
    tag = f"CUDA {int(version[1]) // 1000}.{int(version[1]) % 1000 // 10}" if version else "CUDA ?"
    for api, header in (("cuda-driver", "cuda.h"), ("cuda-runtime", "driver_types.h")):
        text = _read(os.path.join(include, header))
        for m in _ENUM_VALUE.finditer(text):
            name = m["name"]
            if name in ("CUDA_SUCCESS", "cudaSuccess") or name.endswith(("StartupFailure", "ApiFailureBase")):
                continue
            line = text.count("\n", 0, m.start("name")) + 1
            rows.append(_row(api, name, m["num"], _doc_text(m["doc"]), rf"\b{name}\b", "CUDA Toolkit",
                             f"include/{header}", line, tag, tag))
    return rows


# --------------------------------------------------------------------------- NVML (nvml.h)

_NVML_VALUE = re.compile(r"^\s*(NVML_ERROR_\w+)\s*=\s*(\d+),?\s*//!<\s*(.*)$", re.M)


def mine_nvml(git: Git, log: io.TextIOBase) -> list[dict]:
    """``nvmlReturn_t`` in nvml.h (NVIDIA's header, vendored by NVIDIA/go-nvml): each code's name, number and
    documentation comment, at ``NVML_TAGS``."""
    seen: dict[str, dict] = {}
    for tag in NVML_TAGS:
        path = next(p for p in ("gen/nvml/nvml.h", "pkg/nvml/nvml.h")
                    if git.run("ls-tree", "--name-only", tag, "--", p).strip())
        text = git.run("show", f"{tag}:{path}")
        count = 0
        for m in _NVML_VALUE.finditer(text):
            name, number, doc = m[1], m[2], m[3].strip()
            line = text.count("\n", 0, m.start(1)) + 1
            # pynvml (nvidia-ml-py) raises NVMLError_<the name in CamelCase> (its _extractNVMLErrorsAsClasses)
            camel = "NVMLError_" + "".join(part.capitalize() for part in name.removeprefix("NVML_ERROR_").split("_"))
            if name in seen:
                seen[name].update(text=doc, file=path, line=line, last_tag=tag)
            else:
                seen[name] = _row("nvml", name, number, doc, rf"\b{name}\b|\b{camel}\b", "NVIDIA/go-nvml", path,
                                  line, tag, tag)
            count += 1
        print(f"nvml {tag}: {count} return codes", file=log)
    return list(seen.values())


# --------------------------------------------------------------------------- NCCL (WARN format strings)

_WARN = re.compile(r"(?<![\w.>])WARN\s*\(")


def mine_nccl(git: Git, log: io.TextIOBase) -> list[dict]:
    seen: dict[str, dict] = {}
    for tag in NCCL_TAGS:
        listed = git.run("grep", "-l", "-E", r"\bWARN\s*\(", tag, "--", "src/*.cc", "src/*.h", "src/*.cu")
        paths = [line.split(":", 1)[1] for line in listed.splitlines() if ":" in line]
        made = dropped = 0
        for path in paths:
            text = git.run("show", f"{tag}:{path}")
            for m in _WARN.finditer(text):
                if text[text.rfind("\n", 0, m.start()) + 1:m.start()].lstrip().startswith("#"):
                    continue  # the macro's definition
                args = call_arguments(text, m.end() - 1)
                fmt, _ = format_literal(args[0]) if args else (None, "")
                if fmt is None:
                    dropped += 1
                    continue
                fmt = fmt.split("\n")[0].strip().replace("%m", "%s")  # %m: glibc's strerror(errno), a text
                pattern, literal = pattern_of(fmt)
                if why_dropped(fmt, literal):
                    dropped += 1
                    continue
                made += 1
                line = text.count("\n", 0, m.start()) + 1
                key = pattern
                if key in seen:
                    seen[key].update(file=path, line=line, last_tag=tag)
                else:
                    seen[key] = _row("nccl", os.path.basename(path), "", fmt, r"NCCL WARN\s+" + pattern, "NVIDIA/nccl",
                                     path, line, tag, tag)
        print(f"nccl {tag}: {made} WARN formats read, {dropped} dropped (not a literal or too little fixed text)",
              file=log)
    return list(seen.values())


# --------------------------------------------------------------------------- DCGM (failure codes)

def mine_dcgm(git: Git, log: io.TextIOBase) -> list[dict]:
    seen: dict[str, dict] = {}
    path = "dcgmlib/dcgm_errors.h"
    for tag in DCGM_TAGS:
        text = git.run("show", f"{tag}:{path}")
        joined = re.sub(r"\\\n", " ", text)
        defines = {m[1]: m[2] for m in re.finditer(r"^#define\s+(\w+)\s+(.*)$", joined, re.M)}

        def string(name: str, depth: int = 0, defines: dict[str, str] = defines) -> str:
            """A macro's string, through macros that name other macros (``..._NEXT SYSTEM_TRIAGE_MSG``)."""
            value = defines.get(name, "").split("/*")[0].strip()
            if re.fullmatch(r"\w+", value) and depth < 4:
                return string(value, depth + 1)
            return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', value))

        count = 0
        for m in re.finditer(r"^\s*(DCGM_FR_\w+)\s*=\s*(\d+)\s*,?\s*(?://!<\s*\d*\s*(.*))?$", text, re.M):
            name, number, brief = m[1], m[2], (m[3] or "").strip()
            if name in ("DCGM_FR_OK", "DCGM_FR_ERROR_SENTINEL") or "NOT USED" in brief:
                continue
            message, action = string(name + "_MSG"), string(name + "_NEXT")
            pattern = rf"\b{name}\b"
            msg_pattern, literal = pattern_of(message)
            if message and not why_dropped(message, literal):
                pattern += "|" + msg_pattern.removesuffix(r"\s*$")
            line = text.count("\n", 0, m.start(1)) + 1
            described = f"{brief}: {message}" if message else brief
            if name in seen:
                seen[name].update(text=described, pattern=pattern, action=action, line=line, last_tag=tag)
            else:
                seen[name] = _row("dcgm", name, number, described, pattern, "NVIDIA/DCGM", path, line, tag, tag,
                                  action=action)
            count += 1
        print(f"dcgm {tag}: {count} failure codes", file=log)
    return list(seen.values())


# --------------------------------------------------------------------------- PyTorch (CUDA initialisation)

_TORCH_CALL = re.compile(r"\b(TORCH_CHECK|TORCH_WARN(?:_ONCE)?)\s*\(")
_CXX_PIECE = re.compile(r'\s*"((?:[^"\\]|\\.)*)"\s*')
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)[.?!](?=\s)")
MIN_TORCH_FIXED = 16  # letters and digits a message needs: "CUDA initialization: %s" alone is a wrapper, not a row
# analyze looks a line up in the PyTorch rows only when it names CUDA, torch or the NVIDIA driver (mined_api's
# _MENTIONS): a message line that names none ("Can't initialize NVML", a template's second line "environment variable
# or add NVCC to your system PATH.") would be a row nothing finds
_TORCH_MENTION = re.compile(r"(?i:cuda)|[Tt]orch|NVIDIA driver")


def _cxx_message(args: list[str]) -> str:
    """TORCH_CHECK's message: its pieces streamed one after the other; a piece that is not a literal prints a value."""
    out = []
    for arg in args:
        pieces, i = [], 0
        while i < len(arg):
            m = _CXX_PIECE.match(arg, i)
            if m is None:
                break
            pieces.append(m.group(1).encode().decode("unicode_escape"))
            i = m.end()
        out.append("".join(pieces) if pieces and i >= len(arg.rstrip()) else "%s")
    return "".join(out)


def _python_text(node) -> str | None:
    """A message's text: a string, an f-string or ``"...".format(...)`` with each value as %s; None for anything
    else."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "%s" for v in node.values)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
        return _FORMAT_FIELD.sub("%s", node.func.value.value)
    return None


_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")  # str.format's fields ("{}", "{0}", "{user_compiler}"): values


def _template_name(node) -> str | None:
    """The variable a message is formatted from: ``NAME``, ``NAME.format(...)`` or ``NAME % (...)``."""
    import ast

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        node = node.func.value
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        node = node.left
    return node.id if isinstance(node, ast.Name) else None


def _python_messages(text: str, functions: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """(line, level, message) of the named functions of a module: what they raise, what they warn, and each line of
    a template they raise or warn (a template is assigned in the module or in the function; its lines are printed as
    lines of their own)."""
    import ast

    tree = ast.parse(text)
    found, templates = [], {}
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in functions):
        for node in ast.walk(fn):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                message, level = node.exc.args[0], "error"
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "warn" and node.args:
                message, level = node.args[0], "warning"
            else:
                continue
            if _python_text(message) is not None:
                found.append((message.lineno, level, _python_text(message)))
            elif _template_name(message):
                templates.setdefault(_template_name(message), level)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in templates and _python_text(node.value) is not None):
            for offset, line in enumerate(_python_text(node.value).split("\n")):
                if line.strip():
                    found.append((node.value.lineno + offset, templates[node.targets[0].id],
                                  _FORMAT_FIELD.sub("%s", line.strip())))
    return sorted(found)


def _cxx_messages(text: str) -> list[tuple[int, str, str]]:
    found = []
    for m in _TORCH_CALL.finditer(text):
        args = call_arguments(text, m.end() - 1)
        pieces = args[1:] if m.group(1) == "TORCH_CHECK" else args
        if not pieces:
            continue
        found.append((text.count("\n", 0, m.start()) + 1, "error" if m.group(1) == "TORCH_CHECK" else "warning",
                      _cxx_message(pieces)))
    return found


def _first_sentence(message: str) -> str:
    """What a pasted line surely holds: a long message's first sentence (users cut the advice that follows)."""
    message = message.strip().split("\n")[0].strip()
    end = _SENTENCE_END.search(message)
    return message[:end.end()] if end and len(message) > 80 else message


def read_tagged(checkout: str, tag: str, path: str) -> str:
    """A file of pytorch/pytorch at a release tag: from a clone, else from the torch wheel of that version in
    ``checkout/wheels/``, else from ``checkout/<tag>/<path>``."""
    if os.path.exists(os.path.join(checkout, ".git")) or os.path.exists(os.path.join(checkout, "HEAD")):
        return Git(checkout).run("show", f"{tag}:{path}")
    wheels = sorted(glob.glob(os.path.join(checkout, "wheels", f"torch-{tag.removeprefix('v')}-*.whl")))
    if wheels:
        with zipfile.ZipFile(wheels[0]) as wheel:
            return wheel.read(path).decode("utf-8")
    return _read(os.path.join(checkout, tag, path))


def _torch_row(rows: dict[str, dict], path: str, line: int, level: str, message: str, tag: str) -> bool:
    """Add (or carry to a newer tag) one message's row; False when it is too short to be one."""
    shown = re.sub(r"(?::\s*|\s+)%s\s*$", "", _first_sentence(message)).rstrip(" :")
    pattern, literal = pattern_of(shown)
    if (why_dropped(shown, literal) or sum(c.isalnum() for c in literal) < MIN_TORCH_FIXED
            or not _TORCH_MENTION.search(literal)):
        return False
    if pattern in rows:
        if rows[pattern]["file"] == path:  # a message two files print is the first file's row
            rows[pattern].update(line=line, last_tag=tag)
    else:
        kind = "UserWarning" if level == "warning" else "RuntimeError"
        rows[pattern] = _row("pytorch", kind, "", shown, pattern.removesuffix(r"\s*$"), "pytorch/pytorch", path,
                             line, tag, tag)
    return True


def mine_pytorch(checkout: str, log: io.TextIOBase) -> list[dict]:
    rows: dict[str, dict] = {}
    for tag in PYTORCH_TAGS:
        for path, functions in PYTORCH_FUNCTIONS.items():
            found = _python_messages(read_tagged(checkout, tag, path), functions)
            made = sum(_torch_row(rows, path, line, level, message, tag) for line, level, message in found)
            print(f"pytorch {path} at {tag}: {made} messages read, {len(found) - made} dropped "
                  "(too little fixed text, or naming neither CUDA nor torch)", file=log)
    for path, commit, lines in PYTORCH_PINS:
        found = _cxx_messages(read_pinned(checkout, path, commit, log, lines))
        made = sum(_torch_row(rows, path, line, level, message, commit) for line, level, message in found)
        print(f"pytorch {path} at {commit[:12]} (first {lines} lines): {made} messages read, {len(found) - made} "
              "dropped (too little fixed text, or naming neither CUDA nor torch)", file=log)
    return list(rows.values())


# --------------------------------------------------------------------------- rows

def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _row(api: str, name: str, number: str, text: str, pattern: str, source: str, path: str, line: int,
         first: str, last: str, action: str = "") -> dict:
    return {"api": api, "name": name, "number": number, "text": text, "pattern": pattern, "action": action,
            "source": source, "file": path, "line": line, "first_tag": first, "last_tag": last}


POINTERS = ("code", "symptom", "cause", "decides")  # the columns api_causes.csv gives a row it matches


def _causes() -> list[tuple[str, re.Pattern[str], dict[str, str]]]:
    """Each row of api_causes.csv: its API, its match, and what a row it matches points to (the check, the symptom,
    the cause, and whether the error confirms that cause or only suggests it)."""
    with open(CAUSES, encoding="utf-8", newline="") as handle:
        return [(row["api"], re.compile(row["match"]), {k: row[k] for k in POINTERS})
                for row in csv.DictReader(handle)]


_KEY_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")


def finish(rows: list[dict]) -> list[dict]:
    """Ids, index keys and causes. The key is the enum name (lower case) or, for NCCL, the format's longest word."""
    causes = _causes()
    for row in rows:
        row["id"] = hashlib.sha1(f"{row['api']}|{row['pattern']}".encode()).hexdigest()[:10]
        if row["api"] in ("nccl", "pytorch"):
            words = _KEY_WORD.findall(re.sub(r"%\S", " ", row["text"]))
            row["key"] = max(words, key=len).lower() if words else "warn"
        else:
            row["key"] = row["name"].lower()
        row.update(dict.fromkeys(POINTERS, ""))
        for api, match, pointer in causes:
            # an NCCL row by its file and format (src/misc/ibvwrap.cc's "Call to %s failed" is a verbs call)
            by_text = api in ("nccl", "pytorch")  # PyTorch's rows too: their name is only an exception class
            if api == row["api"] and match.search(f"{row['file']} {row['text']}" if by_text else row["name"]):
                row.update(pointer)
                break
    return sorted(rows, key=lambda r: (list(APIS).index(r["api"]), int(r["number"] or 0), r["name"], r["text"]))


def write(rows: list[dict], out: str) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: row[k] for k in COLUMNS} for row in rows)
    with open(out, "w", encoding="utf-8", newline="") as handle:
        handle.write(buffer.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cuda-include")
    parser.add_argument("--nvml")
    parser.add_argument("--nccl")
    parser.add_argument("--dcgm")
    parser.add_argument("--pytorch")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args(argv)
    kept: list[dict] = []
    if os.path.exists(args.out):  # a source not given keeps its committed rows
        given = {api for api, on in (("cuda-driver", args.cuda_include), ("cuda-runtime", args.cuda_include),
                                     ("nvml", args.nvml), ("nccl", args.nccl), ("dcgm", args.dcgm),
                                     ("pytorch", args.pytorch)) if on}
        with open(args.out, encoding="utf-8", newline="") as handle:
            kept = [row for row in csv.DictReader(handle) if row["api"] not in given]
    rows = list(kept)
    if args.cuda_include:
        rows += mine_cuda(args.cuda_include)
    if args.nvml:
        rows += mine_nvml(Git(args.nvml), sys.stderr)
    if args.nccl:
        rows += mine_nccl(Git(args.nccl), sys.stderr)
    if args.dcgm:
        rows += mine_dcgm(Git(args.dcgm), sys.stderr)
    if args.pytorch:
        rows += mine_pytorch(args.pytorch, sys.stderr)
    rows = finish(rows)
    for api in APIS:
        print(f"{api}: {sum(r['api'] == api for r in rows)} rows, "
              f"{sum(r['api'] == api and bool(r['code']) for r in rows)} pointing to a check", file=sys.stderr)
    write(rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
