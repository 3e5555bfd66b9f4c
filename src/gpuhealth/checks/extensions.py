"""A compiled PyTorch extension built for another torch (GH627): "flash_attn_2_cuda...so: undefined symbol: _ZN3c10...",
and a torchvision that a pasted `pip list` shows beside a torch it was not built for."""

from __future__ import annotations

from collections.abc import Iterator

from gpuhealth.checks.registry import Draft, Expectations, Skip, check, line_evidence, table_fixes
from gpuhealth.knowledge.signatures import signature
from gpuhealth.model import Evidence, MessageLine, Severity, Snapshot

UNDEFINED = ".so: undefined symbol: "
MAX_SYMBOL = 200  # characters of a mangled symbol quoted back
# pip names of the extensions whose compiled files carry the name (or sit in a folder of that name); the first one a
# path names is the package to reinstall ("flash_attn_2_cuda" -> flash-attn)
EXTENSIONS = ("flash_attn", "torchvision", "torchaudio", "xformers", "vllm", "apex", "mmcv", "detectron2",
              "pytorch3d", "deepspeed", "bitsandbytes", "torch_scatter", "torch_sparse", "torch_cluster")


@check("GH627", "torch-extension-mismatch", "A PyTorch extension was built for another torch version",
       reads=("messages", "torch"))
def torch_extension_mismatch(snapshot: Snapshot, expect: Expectations) -> Iterator[Draft | Skip]:
    """
    What:
    A compiled PyTorch extension (flash-attn, torchvision, torchaudio, xformers, apex, vllm ...) cannot be
    imported because it needs a symbol of PyTorch's C++ library that the installed torch does not have:
    "ImportError: .../flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi".
    Also a pasted `pip list` or `pip freeze` whose torchvision belongs to another torch version (the pytorch/vision
    README's table: torchvision 0.(N+15) goes with torch 2.N, 0.(N+1) with torch 1.N).

    Why it matters:
    Such an extension was compiled against another torch version, or with the other C++ ABI flag
    (`_GLIBCXX_USE_CXX11_ABI`); it never loads with this torch. Reinstalling the driver or CUDA changes
    nothing: the Python packages disagree.

    How to fix:
    Compare the versions (`pip list | grep -i -e torch -e flash -e xformers`) with what the installed torch is
    (`python -c "import torch; print(torch.__version__, torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI)"`).
    Install the extension's build for that torch version, CUDA and ABI flag (a prebuilt wheel names them, e.g.
    `cu122torch2.3cxx11abiFALSE`), or rebuild it against the installed torch
    (`pip install --no-build-isolation --no-cache-dir --force-reinstall <extension>`).

    Exceptions:
    `gpuhealth check` reads no program output and no pip listing: there it is skipped.
    """
    lines = [m for m in snapshot.messages or ()
             if m.signature and signature(m.signature).cause == "torch-extension-mismatch"]
    torch = snapshot.torch
    listed = dict(torch.extensions) if torch is not None else {}
    if not lines and not listed:
        yield Skip("needs a program's ImportError or a pip listing with torch and its extensions (gpuhealth analyze)")
        return
    disagree = mismatched_torchvision(torch.torch_version if torch else None, listed.get("torchvision"))
    if not lines and not disagree:
        return
    parts = [f"{', '.join(sorted({_named(m) for m in lines}))} cannot load: it was built for another "
             "torch version or C++ ABI than the installed one"] if lines else []
    if disagree:
        parts.append(disagree)
    elif lines and torch is not None and torch.torch_version:
        shown = [f"{name} {version}" for name, version in listed.items() if version and name in _pip_names(lines)]
        parts.append(f"installed: torch {torch.torch_version}" + (", " + ", ".join(shown) if shown else ""))
    hint = abi_hint(lines) if not disagree else ""
    if hint:
        parts.append(hint)
    evidence = line_evidence(lines)
    if listed and torch is not None:
        evidence += (Evidence(snapshot.sources.get("torch", "pip list"),
                              (f"torch {torch.torch_version or '?'}",
                               *(f"{name} {version}" for name, version in list(listed.items())[:6]))),)
    yield Draft(Severity.CRITICAL if lines else Severity.WARNING, "; ".join(parts), evidence=evidence,
                fixes=table_fixes("GH627"), explains=("GH612", "GH605", "GH610", "GH806"))


def extension_of(line: str) -> str:
    """The pip name of the extension whose compiled file the line names ("flash_attn_2_cuda...so" -> flash-attn),
    or the file's own name when it is none the table knows. Plain string work: no pattern runs on the line."""
    at = line.find(UNDEFINED)
    path = line[:at] if at >= 0 else line
    path = path.replace("\\", "/").split()[-1] if path.split() else ""
    lowered = path.lower()
    for name in EXTENSIONS:
        if name in lowered:
            return name.replace("_", "-")
    name = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return name or "a compiled extension"


def _pip_names(lines: list[MessageLine]) -> set[str]:
    return {_named(m) for m in lines}


def _named(message: MessageLine) -> str:
    """The extension a line names: a program's line by its compiled file (:func:`extension_of`); a reporter's sentence
    ("flash-attn was built for another torch") by the first known extension it mentions, since its last word before
    "undefined symbol" is no file name."""
    if not message.reported:
        return extension_of(message.line)
    lowered = message.line.lower().replace("-", "_")
    return next((name.replace("_", "-") for name in EXTENSIONS if name in lowered), "a compiled extension")


def abi_hint(lines: list[MessageLine]) -> str:
    """What the mangled name says about the C++ ABI: a std::__cxx11 string in the missing symbol means the extension
    was built with the new ABI (another torch version, or _GLIBCXX_USE_CXX11_ABI=1 against a torch built with 0)."""
    for message in lines:
        at = message.line.find(UNDEFINED)
        symbol = message.line[at + len(UNDEFINED):].split()[0][:MAX_SYMBOL] if at >= 0 and message.line[
            at + len(UNDEFINED):].split() else ""
        if "__cxx11" in symbol:
            return ("the missing symbol uses the C++11 string ABI: if the versions match, the extension was built with "
                    "_GLIBCXX_USE_CXX11_ABI=1 and this torch without it (take the cxx11abiFALSE build)")
    return ""


def _minor(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of "2.3.0+cu121", "0.18.1"; None when it does not start with two numbers."""
    if not version:
        return None
    fields = version.split("+", 1)[0].split(".")
    if len(fields) < 2 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    return int(fields[0]), int(fields[1])


def torchvision_for(torch_version: str | None) -> tuple[int, int] | None:
    """The torchvision (major, minor) built for a torch version, by the pytorch/vision README's table: torch 2.N ->
    0.(N+15), torch 1.N -> 0.(N+1) from 1.4 on. None for versions the table does not give by that rule."""
    key = _minor(torch_version)
    if key is None:
        return None
    major, minor = key
    if major == 2:
        return 0, minor + 15
    if major == 1 and minor >= 4:
        return 0, minor + 1
    return None


def mismatched_torchvision(torch_version: str | None, vision_version: str | None) -> str:
    """"torchvision 0.17.0 is built for torch 2.2, but torch 2.1.0 is installed", or "" when they belong together
    or either is unknown."""
    wanted, have = torchvision_for(torch_version), _minor(vision_version)
    if wanted is None or have is None or wanted == have:
        return ""
    built_for = next((f"{major}.{minor}" for major, minor in ((2, have[1] - 15), (1, have[1] - 1))
                      if have[0] == 0 and torchvision_for(f"{major}.{minor}") == have and minor >= 0), None)
    return (f"torchvision {vision_version} is built for torch {built_for or 'another version'}, but torch "
            f"{torch_version} is installed (torchvision {wanted[0]}.{wanted[1]} goes with it)")
