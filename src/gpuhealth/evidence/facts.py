"""Command facts: what a command line and its output say together, when the output alone says little.

``False`` means nothing on its own; after ``torch.cuda.is_available()`` it means PyTorch sees no GPU. An
empty output after ``lsmod | grep nvidia`` means the module is not loaded. Each fact is a row: a pattern
searched in the command line as typed (pipeline included) and a judge ``(command, output) -> Fact | None``
giving snapshot field overlays (like an evidence kind's parser) and, when the pair shows one, a symptom
id from ``knowledge/symptoms.csv``. Facts run on every block of a terminal session; they never raise.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import field
from typing import Any

from gpuhealth.evidence.registry import normalise_command
from gpuhealth.lazyre import guarded_re, has, has_folded, lazy_re
from gpuhealth.model import (
    CommandRun,
    CudaState,
    DeviceRequest,
    GpuAllocation,
    InstallState,
    LateVisibility,
    OsInfo,
    P2pEvidence,
    TorchEnv,
)
from gpuhealth.records import record


@record
class Fact:
    overlays: dict[str, Any] = field(default_factory=dict)
    symptom: str | None = None
    note: str = ""  # what the pair showed, for `analyze -v` and the evidence line


Judge = Callable[[str, str], "Fact | None"]


@record
class CommandFact:
    name: str
    command: re.Pattern[str]
    judge: Judge


COMMAND_FACTS: list[CommandFact] = []


def command_fact(name: str, command: str) -> Callable[[Judge], Judge]:
    def wrap(judge: Judge) -> Judge:
        COMMAND_FACTS.append(CommandFact(name, lazy_re(command), judge))
        return judge

    return wrap


def facts_for(command: str, output: str) -> list[tuple[str, Fact]]:
    """Every fact the pair (command, output) shows, by name."""
    found = []
    for fact in COMMAND_FACTS:
        if fact.command.search(command[:2000]):
            result = fact.judge(command, output)
            if result is not None:
                found.append((fact.name, result))
    return found


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


_NOT_FOUND = lazy_re(r"command not found|: not found$|No such file or directory$", re.M)
_NO_TORCH = "No module named 'torch'"


@command_fact("torch-cuda-available", r"cuda\.(?:is_available|device_count)\(\)")
def _torch_available(command: str, output: str) -> Fact | None:
    if _NO_TORCH in output:
        return Fact({"torch": TorchEnv(installed=False)}, None, "torch is not installed")
    last = _last_line(output)
    # print(torch.__version__, torch.cuda.is_available()) prints "2.1.0+cpu False": the last word counts
    words = last.split()
    answer = words[-1] if words else ""
    if answer in ("False", "0") and len(words) <= 4:
        version = words[0] if len(words) > 1 and re.match(r"\d+\.\d+", words[0]) else None
        return Fact({"torch": TorchEnv(installed=True, cuda_available=False, torch_version=version)}, "torch-no-gpu",
                    f"{command.strip()[:80]} -> {last}")
    if answer == "True" or (answer.isdigit() and answer != "0" and "device_count" in command):
        return Fact({"torch": TorchEnv(installed=True, cuda_available=True)}, None, "PyTorch sees the GPU")
    return None


_CUDA_RELEASE = lazy_re(r"\d{1,2}\.\d{1,2}")


@command_fact("torch-version-cuda", r"torch\.version\.cuda\b")
def _torch_version_cuda(command: str, output: str) -> Fact | None:
    """``print(torch.version.cuda)`` -> ``12.1``: the CUDA runtime the wheel was built with (GH601 holds it to the
    driver). ``print(torch.__version__, torch.version.cuda)`` prints both; the last word is CUDA's."""
    if _NO_TORCH in output:
        return None
    words = _last_line(output).split()
    if not words or len(words) > 3 or not _CUDA_RELEASE.fullmatch(words[-1]):
        return None  # "None" (a CPU build) or not the value: the other facts and the catalogue read those
    version = words[0] if len(words) > 1 and re.match(r"\d+\.\d+", words[0]) else None
    return Fact({"torch": TorchEnv(installed=True, torch_cuda_version=words[-1], torch_version=version)}, None,
                f"PyTorch built with CUDA {words[-1]}")


_TORCH_RELEASE = lazy_re(r"\d{1,2}\.\d{1,3}(?:\.\d{1,3})?(?:[a-z]{1,5}\d{0,12})?(?:\+[\w.]{1,40})?")


@command_fact("torch-version", r"torch\.__version__")
def _torch_version(command: str, output: str) -> Fact | None:
    """``print(torch.__version__)`` -> ``2.3.1+cu121``: the wheel's version, whose local part says its build (a CUDA
    12.1 wheel; ``+cpu`` a CPU-only one). Printed with other values, the other facts read the line."""
    if _NO_TORCH in output:
        return None
    words = _last_line(output).split()
    if len(words) != 1 or not _TORCH_RELEASE.fullmatch(words[0]):
        return None
    from gpuhealth.evidence.listings import torch_from_version

    return Fact({"torch": torch_from_version(words[0])}, None, f"PyTorch {words[0]}")


_SMI_FORMS = ("NVIDIA-SMI", "<nvidia_smi_log", "NVSMI LOG", "GPU 0:", "Product Name", "index", "GPU0")


@command_fact("nvidia-smi-run", r"^(?:\S*=\S*\s+)*(?:sudo\s+(?:-\S+\s+)*)?(?:\S*/)?nvidia-smi\b")
def _smi_run(command: str, output: str) -> Fact | None:
    argv = tuple(normalise_command(command).split()) or ("nvidia-smi",)
    if _NOT_FOUND.search(output) and "nvidia-smi" in output:
        return Fact({"smi_run": CommandRun(argv, None, stderr=output.strip()[:2000], error="not installed")},
                    None, "nvidia-smi is not installed")
    if not output.strip():
        return None
    if any(form in output[:8192] for form in _SMI_FORMS) and "failed" not in output[:2000].lower():
        return Fact({"smi_run": CommandRun(argv, 0)}, None, "nvidia-smi answered")
    # a failure: its message goes through the signature catalogue; the exit status is not in a paste
    return None


_LSMOD_LINE = lazy_re(r"^(?P<name>\w+)\s+\d+\s+\d+", re.M)


@command_fact("lsmod-grep", r"^(?:sudo\s+)?lsmod\s*\|\s*grep\b")
def _lsmod_grep(command: str, output: str) -> Fact | None:
    """``lsmod | grep nvidia`` lists only the modules the pattern matches: the names it shows are loaded, and
    a module the pattern would have shown but that is absent is not loaded; nothing is known of the rest
    (``Snapshot.kernel_module_filters``), so nouveau is not "ruled out" by a grep for nvidia."""
    names = tuple(dict.fromkeys(m["name"] for m in _LSMOD_LINE.finditer(output[:65536])))
    pattern = grep_pattern(command)
    if names:
        return Fact({"kernel_modules": names, "kernel_module_filters": (pattern or "",)}, None,
                    f"loaded: {', '.join(names)}")
    if output.strip() or not pattern:
        return None
    return Fact({"kernel_modules": (), "kernel_module_filters": (pattern,)}, None, f"no module matching {pattern!r}")


_GREP_ARGS_OPTIONS = frozenset("EFGiIswxHhn")  # flags that keep grep printing the matching lines as they are


def grep_pattern(command: str) -> str | None:
    """The pattern of the one ``grep`` after ``lsmod |`` as :func:`gpuhealth.model.grep_would_show` reads it
    (lower-cased with ``-i``; ``=`` first with ``-w``/``-x``); None when the listing was inverted, counted,
    piped on or cannot be read (it then proves no absence)."""
    try:
        import shlex  # here: few pieces are an lsmod piped to grep

        lexer = shlex.shlex(command[:2000], posix=True, punctuation_chars="|;&<>")
        tokens = list(lexer)
    except ValueError:
        return None
    if tokens.count("|") != 1 or any(t and set(t) <= set(";&<>") for t in tokens):
        return None
    words = tokens[tokens.index("|") + 1:]
    patterns: list[str] = []
    flags: set[str] = set()
    args = iter(words[1:])
    for word in args:
        if word == "-e":
            patterns.append(next(args, ""))
        elif word.startswith("-") and len(word) > 1:
            if not set(word[1:]) <= _GREP_ARGS_OPTIONS:
                return None  # -v, -c, -l, -o, -A ... print something else than the matching lines
            flags.update(word[1:])
        else:
            patterns.append(word)
    if len(patterns) != 1 and not (patterns and all(patterns)):
        return None
    pattern = "|".join(patterns)
    if "i" in flags:
        pattern = pattern.lower()
    return ("=" if flags & {"w", "x"} else "") + pattern


@command_fact("device-nodes-absent", r"^(?:sudo\s+)?ls\b.*/dev/nvidia")
def _device_nodes(command: str, output: str) -> Fact | None:
    if "No such file or directory" in output and "nvidia" in output and not re.search(r"/dev/nvidia\S*\s*$", output,
                                                                                     re.M):
        return Fact({"device_nodes": ()}, None, "no /dev/nvidia* device files")
    return None


@command_fact("proc-version-absent", r"^(?:sudo\s+)?cat\s+/proc/driver/nvidia/version")
def _proc_version_absent(command: str, output: str) -> Fact | None:
    if "No such file or directory" in output:
        # the file exists exactly while nvidia.ko is loaded: the module list is known for that one name
        return Fact({"unavailable": {"driver": "not loaded: /proc/driver/nvidia/version does not exist"},
                     "kernel_modules": (), "kernel_module_filters": ("=nvidia",)}, None,
                    "the nvidia module is not loaded")
    return None


_PCI_ADDRESS = lazy_re(r"(?<![\w:])([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])(?![\w.])")


@command_fact("nvidia-pci-driver", r"^(?:sudo\s+)?ls\b[^|]*/sys/bus/pci/drivers/nvidia/?(?:\s|$)")
def _nvidia_pci_driver(command: str, output: str) -> Fact | None:
    """``ls /sys/bus/pci/drivers/nvidia``: the directory exists exactly while nvidia.ko is loaded (the module registers
    its PCI driver there), and lists the PCI addresses of the devices it took. Missing: the module is not loaded."""
    from gpuhealth.model import PciDevice, normalize_pci_address

    filters = ("=nvidia",)
    if "No such file or directory" in output:
        return Fact({"kernel_modules": (), "kernel_module_filters": filters}, None, "the nvidia module is not loaded")
    if not any(word in output for word in ("bind", "module", "new_id", "uevent")):
        return None  # not that directory's listing
    addresses = [normalize_pci_address(m[1]) for m in _PCI_ADDRESS.finditer(output[:65536])]
    bound = tuple(PciDevice(a, None, None, kernel_driver="nvidia") for a in dict.fromkeys(addresses) if a)[:64]
    found: dict[str, Any] = {"kernel_modules": ("nvidia",), "kernel_module_filters": filters}
    if bound:
        found["pci_devices"] = bound
    return Fact(found, None, f"the nvidia module is loaded and bound to {len(bound)} device(s)")


_VAR = lazy_re(r"^echo\s+[\"']?\$\{?(?P<name>[A-Z_][A-Z0-9_]*)\}?[\"']?\s*$")


@command_fact("echo-variable", r"^echo\s+[\"']?\$")
def _echo_variable(command: str, output: str) -> Fact | None:
    m = _VAR.match(command.strip())
    if not m:
        return None
    lines = [line for line in output.splitlines() if line.strip()]
    if len(lines) > 1:
        return None
    value = lines[0].strip() if lines else ""
    return Fact({"env": {m["name"]: value}}, None, f"{m['name']}={value}")


# A variable that decides which GPUs CUDA (or the container runtime) shows, set where the user shows it:
# `export CUDA_VISIBLE_DEVICES=1` in a script or a session, `CUDA_VISIBLE_DEVICES="" python x.py`, `%env ...` in a
# notebook, `-e NVIDIA_VISIBLE_DEVICES=none` or a compose file's `- NVIDIA_VISIBLE_DEVICES=void`, or
# `os.environ["CUDA_VISIBLE_DEVICES"] = "2"` in Python. GH608 judges the value (CUDA programming guide, "CUDA
# Environment Variables": an empty value or an index that is no GPU hides devices).
MAX_LINE_TEXT = 4096  # characters of one line searched for an assignment
_VISIBLE_SET = lazy_re(
    r"(?:\bexport\s+|(?<![\w\[\"'])|\benviron\[[\"'])(?P<name>CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)"
    r"(?:[\"']\])?\s?=\s?(?:\"(?P<dq>[^\"\n]{0,200})\"|'(?P<sq>[^'\n]{0,200})'|(?P<bare>[^\s\"'`;&|)]{0,200}))")
# The same variables set in the other ways programs and files write them, each with a literal value: Python's
# os.environ.setdefault("CUDA_VISIBLE_DEVICES", "1") and os.putenv(...), a dict or JSON entry ("CUDA_VISIBLE_DEVICES":
# "1", e.g. an editor's launch configuration), a compose file's map (`NVIDIA_VISIBLE_DEVICES: none`) and a
# Dockerfile's old `ENV NVIDIA_VISIBLE_DEVICES none` form.
_VISIBLE_OTHER = lazy_re(
    r"(?:\b(?:environ\.setdefault|putenv)\(\s{0,4}[\"'](?P<cname>CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)[\"']"
    r"\s{0,4},\s{0,4}|[\"'](?P<kname>CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)[\"']\s{0,4}:\s{0,4}(?=[\"'])|"
    r"^\s{0,12}(?:ENV\s{1,4}(?P<ename>CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)\s{1,4}|"
    r"(?P<yname>CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES):\s{1,4}))"
    r"(?:\"(?P<dq>[^\"\n]{0,200})\"|'(?P<sq>[^'\n]{0,200})'|(?P<bare>[^\s\"'`;&|)]{1,200}))")
# DeepSpeed's launcher sets CUDA_VISIBLE_DEVICES for the processes it starts on a host: to the ids `--include
# host:2,3` lists, or to 0..N-1 for `--num_gpus N` (deepspeed/launcher/launch.py: current_env["CUDA_VISIBLE_DEVICES"] =
# ",".join(map(str, local_gpu_ids))). Only a single host's list is read (`a:0,1@b:2` names several hosts).
_DEEPSPEED = guarded_re(
    r"\bdeepspeed\b[^|;&]{0,300}?\s--(?:include(?:=|\s{1,4})[\"']?[\w.-]{1,100}:(?P<ids>\d{1,3}(?:,\d{1,3}){0,15})"
    r"(?![\w@:,])|num_gpus(?:=|\s{1,4})(?P<n>\d{1,3})\b)", may=has("deepspeed"))
# Accelerate's launcher does the same with `--gpu_ids 1,2` ("all" leaves the variable alone): accelerate's
# utils/launch.py sets current_env["CUDA_VISIBLE_DEVICES"] = args.gpu_ids for the processes it starts.
_ACCELERATE = guarded_re(r"\baccelerate\s{1,4}launch\b[^|;&]{0,300}?\s--gpu[_-]ids(?:=|\s{1,4})[\"']?"
                         r"(?P<ids>\d{1,3}(?:,\d{1,3}){0,15})(?![\w:,])", may=has("accelerate"))
# a Kubernetes container's env entry: `- name: NVIDIA_VISIBLE_DEVICES` with its `value: "none"` on the next line
_K8S_NAME = lazy_re(r"^\s{0,40}-\s{1,4}name:\s{1,4}[\"']?(?P<name>CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)"
                    r"[\"']?\s*$")
_K8S_VALUE = lazy_re(r"^\s{0,40}value:\s{1,4}(?:\"(?P<dq>[^\"\n]{0,200})\"|'(?P<sq>[^'\n]{0,200})'|"
                     r"(?P<bare>[\w,.:-]{1,200}))\s*(?:#.*)?$")
# what a value is not when a program computes it or a page leaves a slot for it: a shell expansion ($GPU, $(...)),
# a format or template slot ({gpu}, %s, %GPU%, <gpu_id>), a call or an index
_NOT_LITERAL = lazy_re(r"[$%{}<>()\[\]]")
# what may follow a literal value in Python (the value is then the whole right-hand side): the line's end, a comment,
# `;`, the call's closing bracket, or the backtick that ends the code in a person's sentence
_PYTHON_REST = lazy_re(r"\s{0,8}(?:[)}\],]\s{0,8}){0,4}(?:[#;`].*)?$")
# a file's `NAME value` or `NAME: value` line holds the value alone (prose that begins with the name does not)
_LINE_REST = lazy_re(r"\s{0,8}(?:#.*)?$")


def _value(m: re.Match[str]) -> str | None:
    return m["dq"] if m["dq"] is not None else m["sq"] if m["sq"] is not None else m["bare"]


def visible_assignments(text: str) -> list[tuple[str, str, re.Match[str]]]:
    """The visibility variables ``text`` (one line: a command, a line of a script or file, prose) assigns a value it
    shows, in order: (name, value, match). A value the line computes is not shown, so not read: a shell expansion
    (``=$GPU``), a template slot (``={gpu}``, ``<gpu_id>``), and in Python anything but a plain string literal
    (``= args.gpu``, ``= str(gpu)``, ``= f"{gpu}"``, ``= "%d" % gpu``, ``= "0" if a else "1"``). An unquoted value
    must end where the shell ends a word (``=1"`` is not read)."""
    line = text[:MAX_LINE_TEXT]
    found: list[tuple[str, str, re.Match[str]]] = []
    for m in (*_VISIBLE_SET.finditer(line), *_VISIBLE_OTHER.finditer(line)):
        value = _value(m)
        groups = m.groupdict()
        name = groups.get("name") or groups.get("cname") or groups.get("kname") or groups.get("ename") or m["yname"]
        python = _in_python(m)
        rest = line[m.end():]
        if python and m["bare"] is not None:
            continue  # os.environ[...] = <an expression>: the value is not in the text
        if (groups.get("ename") or groups.get("yname")) and not _LINE_REST.match(rest):
            continue
        value = value or ""
        if _NOT_LITERAL.search(value):
            continue
        if python and not _PYTHON_REST.match(rest):
            continue  # "0" if x else "1", "{}".format(gpu), "1" + extra: computed from the literal
        if m["bare"] is not None and rest[:1] in ("\"", "'", "`"):
            continue  # the word goes on in quotes the pattern did not take: not the whole value
        if m["bare"] is not None:
            value = value.rstrip(".,")  # "I set CUDA_VISIBLE_DEVICES=1, but": the sentence's comma, not an entry
        found.append((name, value.strip(), m))
    for m in _DEEPSPEED.finditer(line):
        value = m["ids"] if m["ids"] is not None else ",".join(str(i) for i in range(min(int(m["n"]), 64)))
        found.append(("CUDA_VISIBLE_DEVICES", value, m))
    for m in _ACCELERATE.finditer(line):
        found.append(("CUDA_VISIBLE_DEVICES", m["ids"], m))
    found.sort(key=lambda item: item[2].start())
    return found


def _in_python(m: re.Match[str]) -> bool:
    """The assignment is Python's (os.environ, putenv, a dict entry): it changes the running program's environment."""
    return "environ" in m.group() or "putenv" in m.group() or bool(m.groupdict().get("kname"))


def visible_devices_set(text: str) -> dict[str, str]:
    """The visibility variables ``text`` (a command line, a script or prose) assigns, the last value each."""
    return {name: value for name, value, _ in visible_assignments(text)}


# The lines whose meaning is that a process sees no GPU, or not the one it asks for (knowledge/signatures.csv):
# cudaErrorNoDevice, PyTorch's "No CUDA GPUs are available" (a CUDA build counting zero devices) and
# cudaErrorInvalidDevice ("invalid device ordinal"). The command whose output holds one is the failing command whose
# environment decides (``visible_in_effect``).
VISIBILITY_FAILURES = frozenset({"cuda-no-device", "torch-no-cuda-gpus-available", "cuda-invalid-device",
                                 "tf-explicit-gpu-not-registered", "xla-invalid-device-ordinal-value",
                                 "tf-visible-device-list-invalid-id"})
VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
_UNSET = lazy_re(r"(?:^|[;&|]\s{0,4})unset\s{1,4}(?P<names>[A-Z_]{1,40}(?:\s{1,4}[A-Z_]{1,40}){0,8})")
_SHOWN_FILE = lazy_re(r"^(?:cat|less|more|head|bat)\s{1,4}(?P<path>[^\s;&|<>]{1,300})\s*$")
_SOURCED = lazy_re(r"^(?:source|\.)\s{1,4}(?P<path>[^\s;&|<>]{1,300})\s*$")
_SCRIPT_RUN = lazy_re(r"^(?:(?:ba|z|da)?sh\s{1,4})?(?P<path>[^\s;&|<>=]{0,300}\.sh)(?:\s|$)|"
                      r"^python(?:\d(?:\.\d{1,2})?)?(?:\s{1,4}-[uBOSEs]{1,4})*\s{1,4}(?P<py>[^\s;&|<>=-][^\s;&|<>=]{0,300}\.py)"
                      r"(?:\s|$)")
_ENV_SHOWN = lazy_re(r"^(?:env|printenv|export -p|declare -x)\b")  # commands that print the shell's environment


def _script_name(path: str) -> str:
    return posixpath.basename(path.strip("'\""))


def visible_in_effect(blocks: list[tuple[str | None, str]], failing: int) -> dict[str, str | None]:
    """The visibility variables in effect for the command of ``blocks[failing]`` in a terminal session, as the shell
    gives them: an ``export`` (or an assignment standing alone) and ``unset`` hold for every later command, a
    ``VAR=value command`` prefix and the assignments of a script the command runs (``bash run.sh``, or the
    ``os.environ[...]`` of ``python train.py``) only for that command, a ``source``d script's for every later
    command. A script's assignments are known when the session shows its text (``cat run.sh``), and what the shell
    holds where a command prints it (``env``, ``echo $CUDA_VISIBLE_DEVICES``). The failing command's own output may
    show the program setting it (``os.environ[...]`` in its traceback): that is the innermost. A variable maps to
    None when unset, and is absent when the session does not say."""
    persistent: dict[str, str | None] = {}
    scripts: dict[str, dict[str, str]] = {}
    effect: dict[str, str | None] = {}
    for index, (command, output) in enumerate(blocks[:failing + 1]):
        text = (command or "").strip()[:MAX_LINE_TEXT]
        if not text:
            continue
        lines = output.splitlines()[:5000]
        if shown := _SHOWN_FILE.match(text):
            scripts[_script_name(shown["path"])] = env_lines(lines).get("env", {})
        if _ENV_SHOWN.match(text):
            persistent.update(env_lines(lines).get("env", {}))
        elif (echoed := _echo_variable(text, output)) is not None:
            persistent.update({k: v for k, v in echoed.overlays["env"].items() if k in VISIBILITY_VARIABLES})
        own: dict[str, str | None] = {}
        for name, value, m in visible_assignments(text):
            rest = text[m.end():].lstrip()
            lasting = m.group().startswith("export") or not rest or rest.startswith((";", "&&", "||"))
            (persistent if lasting else own)[name] = value
        for unset in _UNSET.finditer(text):
            persistent.update({name: None for name in unset["names"].split() if name in VISIBILITY_VARIABLES})
        if sourced := _SOURCED.match(text):
            persistent.update(scripts.get(_script_name(sourced["path"]), {}))
        elif run := _SCRIPT_RUN.match(text):  # a shell script's assignments, or a Python script's os.environ[...]
            own = {**scripts.get(_script_name(run["path"] or run["py"]), {}), **own}
        if index == failing:  # the program's own setting, shown in its output, comes last
            own.update(env_lines(lines).get("env", {}))
        effect = {**persistent, **own}
    return {name: effect[name] for name in VISIBILITY_VARIABLES if name in effect}


# A GPU index a program asks for: PyTorch's "cuda:3" (quoted, or a command-line value; not an image tag such as
# nvidia/cuda:12.1 or a version), torch.device("cuda", 3), torch.cuda.device(3), torch.cuda.set_device(3), .cuda(3),
# TensorFlow's "/gpu:3" and "/device:GPU:3", and the usual command-line options (--gpu 3, --gpu_id 3, --device 3,
# --device cuda:3). `--gpus N` is a count: not read.
_DEVICE_ASKED = guarded_re(
    r"""(?:(?<=["'`\s=(])|^)cuda:(?P<a>\d{1,3})(?![\d.])|\bset_device\(\s*(?P<b>\d{1,3})\s*\)|"""
    r"""\.cuda\(\s*(?P<c>\d{1,3})\s*\)|/(?:device:)?[Gg][Pp][Uu]:(?P<d>\d{1,3})\b|"""
    r"""(?<![\w-])--(?:gpu|gpu[_-]ids?|device)[= ](?:cuda:)?(?P<e>\d{1,3})(?![\d.,])|"""
    r"""\bdevice\(\s{0,4}["']cuda["']\s{0,4},\s{0,4}(?:index\s{0,2}=\s{0,2})?(?P<f>\d{1,3})\s{0,4}\)|"""
    r"""\bcuda\.device\(\s{0,4}(?P<g>\d{1,3})\s{0,4}\)""",
    may=has_folded("cuda:", "set_device(", ".cuda(", "gpu:", "--gpu", "--device", "device("))
MAX_DEVICE_REQUESTS = 8
# A list of GPU ids a program asks for, the highest of which must exist: PyTorch's DataParallel(device_ids=[0, 1])
# (torch/nn/parallel/data_parallel.py checks each with torch.cuda.get_device_properties, which raises "Invalid device
# id" for an id >= device_count()), Lightning's Trainer(gpus=[0, 1]) and the gpu_ids of many training scripts, in code
# or on the command line (--gpu_ids 0,1, --gpus 0,1), and in a YAML or JSON configuration (`gpu_ids: [0, 1]`,
# `"device_ids": [0, 1]`); Lightning's `devices=[1]` is a list of ids too. A bare `--gpus 2`, `gpus=2` or `devices=2`
# is a count in most programs: a command-line list is read only with two entries or more.
_ID_LIST_ASKED = guarded_re(
    r"""\b(?:device_ids|gpu_ids|gpus|devices)["']?\s{0,2}[=:]\s{0,2}[\[(]\s{0,2}(?P<code>\d{1,3}(?:\s{0,2},\s{0,2}\d{1,3}){0,15})\s{0,2},?\s{0,2}[\])]|"""
    r"""(?<![\w-])--(?:gpus|gpu[_-]ids|device[_-]ids)[= ]["']?(?P<cli>\d{1,3}(?:,\d{1,3}){1,15})(?![\d.])""",
    may=has_folded("device_ids", "gpu_ids", "gpus", "gpu-ids", "device-ids", "devices"))
# TensorFlow's refusals of a GPU it does not have, each with how many it has: XLA's Backend::stream_executor
# ("Invalid device ordinal value (1). Valid range is [0, 0]."), the GPU device factory's check of
# gpu_options.visible_device_list ("'visible_device_list' listed an invalid GPU id '2' but visible device count is
# 1"; "Device id" in newer releases), and the placer's "Could not satisfy explicit device specification
# '/device:GPU:1' because no devices matching that specification are registered in this process; available devices:
# ..." (the devices it lists are those the process has; "because no supported kernel ..." is another failure: not read)
_TF_ORDINAL = guarded_re(r"Invalid device ordinal value \((?P<index>\d{1,3})\)\. "
                         r"Valid range is \[0, (?P<last>\d{1,3})\]", may=has("Invalid device ordinal value"))
_TF_VISIBLE_LIST = guarded_re(r"'visible_device_list' listed an invalid (?:GPU|Device) id '(?P<index>\d{1,3})' but "
                              r"visible device count is (?P<count>\d{1,3})", may=has("'visible_device_list' listed"))
_TF_EXPLICIT = guarded_re(r"Could not satisfy explicit device specification '(?P<spec>[^'\s]{0,200}?"
                          r"(?:device:)?GPU:(?P<index>\d{1,3}))' because no devices matching that specification are "
                          r"registered in this process; available devices: (?P<devices>.{0,3000})",
                          may=has("Could not satisfy explicit device specification"))
_TF_GPU_DEVICE = lazy_re(r"/device:GPU:(\d{1,3})\b")


# A launcher that starts N processes per node, each of which takes GPU LOCAL_RANK (0 to N-1) by the usual
# torch.cuda.set_device(local_rank): torchrun and python -m torch.distributed.launch/run --nproc_per_node=N (PyTorch
# documentation, torchrun (Elastic Launch)); "gpu" or "auto" as the value counts the GPUs itself: not read.
_RANKS_ASKED = guarded_re(r"\b(?:torchrun|torch\.distributed\.(?:launch|run))\b[^|;&]{0,400}?"
                          r"--nproc[_-]per[_-]node(?:=|\s{1,4})(?P<n>\d{1,3})\b", may=has("nproc"))


def _ranks_request(text: str) -> DeviceRequest | None:
    """The last rank's GPU a launcher's command line asks for, or None."""
    m = _RANKS_ASKED.search(text)
    if m is None or int(m["n"]) < 2:
        return None
    count = int(m["n"])
    return DeviceRequest(count - 1, f"--nproc_per_node={count}: ranks 0-{count - 1}, each on GPU LOCAL_RANK",
                         text[:300], ranks=True)


# A GPU index a program's own option gives unless the command line says otherwise: argparse's
# add_argument("--gpu", type=int, default=1) (also --gpu_id, --gpu-ids, --device, --cuda; "cuda:1" and "0,1" forms).
# `--gpus` with a bare number is a count: only its quoted list is read.
_ARG_DEFAULT = guarded_re(
    r"""add_argument\(\s{0,4}(?:["']-\w{1,4}["']\s{0,4},\s{0,4})?["']--(?P<opt>gpus|gpu|gpu[_-]ids?|device|cuda)["']"""
    r"""[^)\n]{0,300}?\bdefault\s{0,2}=\s{0,2}(?:["'](?:cuda:)?(?P<q>\d{1,3}(?:,\d{1,3}){0,15})["']|(?P<n>\d{1,3})\b)""",
    may=has("add_argument"))


def _default_request(text: str) -> DeviceRequest | None:
    m = _ARG_DEFAULT.search(text)
    if m is None or (m["opt"] == "gpus" and m["q"] is None):
        return None
    ids = [int(x) for x in (m["q"] or m["n"]).split(",")]
    return DeviceRequest(max(ids), f"the default of --{m['opt']} ({m['q'] or m['n']})", text[:300], default=True)


def _framework_request(text: str) -> DeviceRequest | None:
    """The GPU a TensorFlow or XLA refusal names, with how many GPUs the process has (its own words)."""
    if (m := _TF_ORDINAL.search(text)) is not None:
        return DeviceRequest(int(m["index"]), f"XLA device ordinal {m['index']}", text[:300], int(m["last"]) + 1)
    if (m := _TF_VISIBLE_LIST.search(text)) is not None:
        return DeviceRequest(int(m["index"]), f"visible_device_list entry {m['index']}", text[:300],
                             int(m["count"]) or None)
    if (m := _TF_EXPLICIT.search(text)) is not None:
        seen = len(set(_TF_GPU_DEVICE.findall(m["devices"])))
        return DeviceRequest(int(m["index"]), m["spec"].lstrip("/"), text[:300], seen or None)
    return None


def _listed_ids(text: str) -> list[DeviceRequest]:
    """The highest id of each GPU id list ``text`` asks for (``device_ids=[0, 1]``, ``--gpu_ids 0,1``)."""
    found = []
    for m in _ID_LIST_ASKED.finditer(text):
        ids = [int(x) for x in (m["code"] or m["cli"]).replace(" ", "").split(",") if x.isdigit()]
        if ids:
            found.append(DeviceRequest(max(ids), " ".join(m.group().split()), text[:300]))
    return found
# torch.load of a checkpoint saved on a GPU this program does not see (torch/serialization.py, validate_cuda_device)
_CHECKPOINT_DEVICE = guarded_re(r"Attempting to deserialize object on CUDA device (?P<index>\d{1,3}) but "
                                r"torch\.cuda\.device_count\(\) is (?P<count>\d{1,3})",
                                may=has("Attempting to deserialize object on CUDA device"))

# PyTorch Lightning's refusal of GPU ids the process does not see, over two lines (lightning/fabric/utilities/
# device_parser.py, _sanitize_gpu_ids: f"You requested gpu: {gpus}\n But your machine only has: {all_available_gpus}";
# older releases wrote "GPUs"). The ids available are the devices this process sees (CUDA_VISIBLE_DEVICES applied).
_LIGHTNING_ASKED = guarded_re(r"You requested (?:gpu|GPUs): \[(?P<ids>\d[\d, ]{0,300})\]",
                              may=has("You requested"))
_LIGHTNING_HAS = lazy_re(r"But your machine only has: \[(?P<ids>\d[\d, ]{0,300})?\]")


def _lightning_request(text: str, following: str) -> DeviceRequest | None:
    """The highest GPU id Lightning was asked for, with how many the process sees, from its two-line refusal."""
    asked = _LIGHTNING_ASKED.search(text)
    if asked is None:
        return None
    has = _LIGHTNING_HAS.search(text[asked.end():]) or _LIGHTNING_HAS.search(following[:MAX_LINE_TEXT])
    if has is None:
        return None
    ids = [int(x) for x in asked["ids"].replace(" ", "").split(",") if x.isdigit()]
    seen = len([x for x in (has["ids"] or "").replace(" ", "").split(",") if x.isdigit()])
    if not ids:
        return None
    return DeviceRequest(max(ids), f"GPU ids [{asked['ids']}]", text[:300], seen)


def device_requests(lines: list[str]) -> tuple[DeviceRequest, ...]:
    """The GPU indices these lines ask for (one per wording), in the order first seen."""
    found: dict[str, DeviceRequest] = {}
    for position, line in enumerate(lines):
        text = line.strip()[:MAX_LINE_TEXT]
        lightning = _lightning_request(text, lines[position + 1] if position + 1 < len(lines) else "")
        if lightning is not None and len(found) < MAX_DEVICE_REQUESTS:
            found.setdefault(lightning.text, lightning)
            continue
        framework = _framework_request(text)
        if framework is not None and len(found) < MAX_DEVICE_REQUESTS:
            found.setdefault(framework.text, framework)
            continue
        saved = _CHECKPOINT_DEVICE.search(text)
        if saved and len(found) < MAX_DEVICE_REQUESTS:
            asked = f"a checkpoint saved on CUDA device {saved['index']}"
            found.setdefault(asked, DeviceRequest(int(saved["index"]), asked, text[:300], int(saved["count"])))
            continue
        launcher = _ACCELERATE.search(text)  # its --gpu_ids become CUDA_VISIBLE_DEVICES: not an index asked for
        scan = text if launcher is None else f"{text[:launcher.start()]} {text[launcher.end():]}"
        for m in _DEVICE_ASKED.finditer(scan):
            digits = next(g for g in m.groups() if g is not None)
            asked = m.group().lstrip("./")
            if asked not in found and len(found) < MAX_DEVICE_REQUESTS:
                found[asked] = DeviceRequest(int(digits), asked, text[:300])
        for listed in _listed_ids(scan):
            if listed.text not in found and len(found) < MAX_DEVICE_REQUESTS:
                found[listed.text] = listed
        ranks = _ranks_request(text)
        if ranks is not None and len(found) < MAX_DEVICE_REQUESTS:
            found.setdefault(ranks.text, ranks)
        default = _default_request(text)
        if default is not None and len(found) < MAX_DEVICE_REQUESTS:
            found.setdefault(default.text, default)
    return tuple(found.values())


# Slurm's request for GPUs, in a job script (`#SBATCH --gres=gpu:2`, `--gres=gpu:a100:2`, `--gpus=2`,
# `--gpus-per-node=a100:2`, `-G 2`) or on sbatch/srun/salloc's command line: Slurm gives the job that many GPUs and
# sets CUDA_VISIBLE_DEVICES to them, so its processes see that many, numbered from 0 (Slurm documentation, "Generic
# Resource (GRES) Scheduling": GPU management). A request per task or per socket multiplies: not read.
_SLURM_GPUS = guarded_re(
    r"(?:^#SBATCH\b|\b(?:sbatch|srun|salloc)\b)[^|;&#]{0,300}?(?:--gres(?:=|\s{1,4})gpu(?::[\w.-]{1,40})?:(?P<g>\d{1,3})"
    r"|--gpus(?:-per-node)?(?:=|\s{1,4})(?:[\w.-]{1,40}:)?(?P<n>\d{1,3})|-G\s{0,4}(?P<s>\d{1,3}))(?![\w:.])",
    may=has("--gres", "--gpus", "-G"))


def device_request_lines(lines: list[str]) -> dict[str, Any]:
    """The overlay for the GPU indices these lines ask for, and the GPUs a Slurm job script or command asks Slurm for
    (``gpus_allocated``, the last one); empty when none does."""
    requests = device_requests(lines)
    found: dict[str, Any] = {"devices_requested": requests} if requests else {}
    for line in lines:
        text = line.strip()[:MAX_LINE_TEXT]
        if (m := _SLURM_GPUS.search(text)) is not None:
            count = int(m["g"] or m["n"] or m["s"])
            if count:
                found["gpus_allocated"] = GpuAllocation(count, text[:300])
    return found


@command_fact("device-requested", r"cuda:\d|set_device|\.cuda\(|[Gg][Pp][Uu]:\d|--gpu|--device|_ids\s{0,2}=|nproc")
def _device_requested(command: str, output: str) -> Fact | None:
    found = device_requests([command])
    if not found:
        return None
    return Fact({"devices_requested": found}, None, ", ".join(r.text for r in found))


@command_fact("visible-devices-set", r"VISIBLE_DEVICES|\bdeepspeed\b|\baccelerate\s+launch\b")  # launchers set it too
def _visible_devices(command: str, output: str) -> Fact | None:
    found = visible_devices_set(command)
    if not found:
        return None
    return Fact({"env": found}, None, ", ".join(f"{k}={v}" for k, v in found.items()))


_RELEASE = lazy_re(r"^\d+\.\d+(?:\.\d+)?[-+][\w.+~-]+$")
_UNAME_A = lazy_re(r"^Linux \S+ (?P<release>\d+\.\d+\S*) #")


@command_fact("uname", r"^(?:sudo\s+)?uname\s+-[a-z]*[ra]")
def _uname(command: str, output: str) -> Fact | None:
    line = _last_line(output)
    m = _UNAME_A.match(line)
    release = m["release"] if m else line if _RELEASE.match(line) else None
    if release is None:
        return None
    # like the uname listing: the install checks compare the running kernel with DKMS and /lib/modules
    return Fact({"os": OsInfo(kernel_release=release), "install": InstallState(kernel_release=release)}, None,
                f"running kernel {release}")


# --------------------------------------------------------------------------- line facts

# Lines that matter wherever they appear (prose, a session, a log) and that no error catalogue holds because
# they are settings, not errors: PCIe ACS redirection, the IOMMU, and NCCL/P2P failures described in words.
# Guarded (lazyre.guarded_re): these run on every line of a log, and few lines hold their words.
_ACS = guarded_re(r"ACSCtl:.{0,80}(?:ReqRedir\+|CmpltRedir\+)", may=has("ACSCtl:"))
_IOMMU = guarded_re(r"\b(?:intel_iommu=on|amd_iommu=on|DMAR: IOMMU enabled|AMD-Vi: Found IOMMU|VT-d (?:is )?enabled)\b"
                    r"|\bIOMMU (?:is )?enabled\b", re.I, may=has_folded("iommu", "vt-d"))
_P2P_FAIL = guarded_re(r"NCCL WARN|NCCL_P2P_DISABLE=1|\bnccl\w*.{0,60}\b(?:hangs?|hung|deadlocks?|stuck|freezes)\b|"
                       r"\b(?:hangs?|hung|deadlocks?|stuck)\b.{0,60}\b(?:nccl|all_?reduce|p2p)\w*|"
                       r"peer access is not supported|cudaErrorPeerAccess\w*|"
                       r"all_reduce_perf.{0,60}\b(?:hangs?|stuck)\b", re.I,
                       may=has_folded("nccl", "allreduce", "all_reduce", "p2p", "peer access", "peeraccess"))
MAX_LINE_FACTS = 8
_LSPCI_BRIDGE = guarded_re(r"((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) PCI bridge\b",
                           may=has("PCI bridge"))  # lspci's device line of a bridge: "03:00.0 PCI bridge: PLX ..."


# A Python line that initialises CUDA in its process: the driver reads CUDA_VISIBLE_DEVICES then (cuInit), and a later
# change to os.environ does not change the devices that process sees. PyTorch: is_available() counts the devices
# through the CUDA runtime (torch/cuda/__init__.py; c10/cuda/CUDAFunctions.cpp keeps that count), and the calls that
# choose or query a device, or move a tensor or module onto one, start CUDA. device_count() is left out: since 2.0 it
# may count through NVML without starting CUDA ("Do not cache the device count prior to CUDA initialization, because
# the number of devices can change due to changes to CUDA_VISIBLE_DEVICES"). TensorFlow and JAX start CUDA when they
# list their devices.
_CUDA_INIT = guarded_re(
    r"\btorch\.cuda\.(?:is_available|set_device|current_device|get_device_name|get_device_properties|"
    r"get_device_capability|init|synchronize|mem_get_info)\s{0,4}\(|\.cuda\(|"
    r"\.to\(\s{0,4}(?:device\s{0,2}=\s{0,2})?[\"']cuda\b|"
    r"\b(?:tf\.config\.(?:experimental\.)?list_physical_devices|tf\.test\.(?:is_gpu_available|gpu_device_name)|"
    r"device_lib\.list_local_devices|jax\.(?:local_)?devices|jax\.device_count)\s{0,4}\(",
    may=has("cuda", "devices", "gpu_", "device_"))
MAX_LATE = 4
# A Ray task or actor declared without a GPU request: Ray assigns GPUs to a task or actor by setting
# CUDA_VISIBLE_DEVICES before its code runs, from its num_gpus (Ray documentation, "GPU Support"), so one that asks
# for none (num_gpus unset or 0) runs with the variable empty and sees no GPU (vllm-project/vllm#3198). A program that
# gives num_gpus elsewhere (`.options(num_gpus=1)`, `ray.remote(num_gpus=1)(f)`) is not read.
_RAY_REMOTE = guarded_re(r"^@ray\.remote\b(?:\((?P<args>[^)\n]{0,300})\))?\s*(?:#.*)?$", may=has("@ray.remote"))
_RAY_GPUS = lazy_re(r"\bnum_gpus\s{0,2}=\s{0,2}(?P<n>[\d.]{1,8})")


def env_lines(lines: list[str]) -> dict[str, Any]:
    """The env overlay for the visibility variables these lines set (``visible_devices_set``); empty if none.

    Read as one program's lines in order: a Python assignment that follows a line initialising CUDA (``_CUDA_INIT``)
    in the same block (at its indentation or deeper, with no line less indented between them, so it runs after it)
    does not change the GPUs the program sees. It is not taken as the variable's value, and is kept apart
    (``visible_set_late``) for GH608 to say so."""
    found: dict[str, str] = {}
    late: list[LateVisibility] = []
    init: tuple[int, str] | None = None  # the indentation and text of the line that initialised CUDA
    k8s: str | None = None  # the variable a Kubernetes env entry named on the line before
    for raw in lines:
        text = raw.rstrip()[:MAX_LINE_TEXT]
        stripped = text.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if k8s is not None and (value := _K8S_VALUE.match(text)) is not None:
            found[k8s] = _value(value) or ""
        k8s = named["name"] if "VISIBLE_DEVICES" in text and (named := _K8S_NAME.match(text)) else None
        indent = len(text) - len(stripped)
        if init is not None and indent < init[0]:
            init = None  # the block that initialised CUDA ended: what follows may run before it (a def, a branch)
        if "VISIBLE_DEVICES" in stripped:
            for name, value, m in visible_assignments(stripped):
                if init is not None and _in_python(m):
                    if len(late) < MAX_LATE:
                        late.append(LateVisibility(name, value, stripped[:300], init[1]))
                else:
                    found[name] = value
        if init is None and _CUDA_INIT.search(stripped):
            init = (indent, stripped[:300])
    overlay: dict[str, Any] = {"env": found} if found else {}
    if late:
        overlay["visible_set_late"] = tuple(late)
    if ray := _ray_without_gpus(lines):
        overlay["ray_without_gpus"] = ray
    return overlay


def _ray_without_gpus(lines: list[str]) -> tuple[str, ...]:
    """The `@ray.remote` decorators of these lines that ask for no GPU; none when any line asks Ray for a GPU in another
    way (a task may be given one with .options(num_gpus=1) where it is called)."""
    found: list[str] = []
    for raw in lines:
        text = raw.strip()[:MAX_LINE_TEXT]
        if "num_gpus" in text and not text.startswith("@ray.remote"):
            m = _RAY_GPUS.search(text)
            if m is None or _nonzero(m["n"]):
                return ()
        if (m := _RAY_REMOTE.match(text)) is None:
            continue
        asked = _RAY_GPUS.search(m["args"] or "")
        if asked is None or not _nonzero(asked["n"]):
            found.append(text[:300])
    return tuple(found[:MAX_LATE])


def _nonzero(number: str) -> bool:
    try:
        return float(number) > 0
    except ValueError:
        return True  # not a number Ray would take: read as a request, so nothing is reported


def p2p_lines(lines: list[str]) -> dict[str, P2pEvidence]:
    """The P2P overlay for these lines: empty when none is about ACS, the IOMMU or a P2P failure."""
    acs: list[str] = []
    iommu: list[str] = []
    failures: list[str] = []
    acs_read = False
    bridges: list[str] = []
    bridge = None  # lspci -vvv: the PCI bridge whose detail lines these are (its ACSCtl names no address)
    for line in lines:
        text = line.strip()[:300]
        if line[:1] not in (" ", "\t"):
            m = _LSPCI_BRIDGE.match(text)
            bridge = m[1] if m else None
        acs_read = acs_read or "ACSCtl:" in text
        if len(acs) < MAX_LINE_FACTS and _ACS.search(text):
            acs.append(text)
            if bridge and bridge not in bridges:
                bridges.append(bridge)
        if len(iommu) < MAX_LINE_FACTS and _IOMMU.search(text):
            iommu.append(text)
        if len(failures) < MAX_LINE_FACTS and _P2P_FAIL.search(text):
            failures.append(text)
    if not (acs or iommu or failures or acs_read):
        return {}
    return {"p2p": P2pEvidence(tuple(failures), tuple(acs), tuple(iommu), acs_read, tuple(bridges))}


# An absolute path to a shared library inside a CUDA toolkit tree (/usr/local/cuda-10.1/lib64/libcufft.so) or a pip
# CUDA wheel (site-packages/nvidia/cusparse/lib/libcusparse.so.12), wherever a program printed it: ldd, a loader
# error, a library-discovery file. Components are bounded and end in "/", so a failed match costs little.
_LIBRARY_FILE = lazy_re(r"(?<![\w.+-])(/(?:[\w.+-]{1,80}/){1,24}lib[\w+-]{1,60}\.so(?:\.\d{1,6}){0,4})(?![\w/])")
_CUDA_TREE = lazy_re(r"/cuda-\d+(?:\.\d+)?/|/(?:site|dist)-packages/nvidia/[\w-]{1,40}/lib/")
MAX_LIBRARY_FILES = 32


# LD_LIBRARY_PATH as a session, a script, an `env` listing or a Dockerfile sets it, at the start of a line:
# `export LD_LIBRARY_PATH=/usr/local/cuda-12.9/compat:$LD_LIBRARY_PATH`, `LD_LIBRARY_PATH=/opt/x ./prog`,
# `ENV LD_LIBRARY_PATH /usr/local/cuda/compat`, `os.environ["LD_LIBRARY_PATH"] = "..."`. The loader searches these
# directories before its cache (ld.so(8)), so a cuda-compat directory there is the libcuda programs load (GH603) and
# two toolkits there compete (GH602). A line of prose that names the variable mid-sentence is not read.
_LD_PATH_SET = lazy_re(
    r"^\s{0,8}(?:export\s{1,4}|ENV\s{1,4}|(?:os\.)?environ\[[\"'])?LD_LIBRARY_PATH(?:[\"']\])?(?:\s{0,2}=\s{0,2}|\s{1,4})"
    r"(?:\"(?P<dq>[^\"\n]{0,2000})\"|'(?P<sq>[^'\n]{0,2000})'|(?P<bare>[^\s\"'`;&|)]{0,2000}))")
MAX_LD_PATH_ENTRIES = 32


def library_path_set(text: str) -> tuple[str, ...]:
    """The directories a line assigns to LD_LIBRARY_PATH, in order: absolute paths only (``$LD_LIBRARY_PATH`` and
    other references are not shown values); () when the line sets none."""
    m = _LD_PATH_SET.match(text[:MAX_LINE_TEXT])
    if not m:
        return ()
    value = m["dq"] if m["dq"] is not None else m["sq"] if m["sq"] is not None else m["bare"] or ""
    entries = [e.strip() for e in value.split(":")[:MAX_LD_PATH_ENTRIES]]
    return tuple(dict.fromkeys(e for e in entries if e.startswith("/") and "$" not in e))


def library_path_lines(lines: list[str]) -> tuple[str, ...]:
    """The directories the last of these lines that assigns LD_LIBRARY_PATH gives it."""
    found: tuple[str, ...] = ()
    for line in lines:
        if "LD_LIBRARY_PATH" in line:
            found = library_path_set(line) or found
    return found


@command_fact("container-image", r"^(?:sudo\s+)?(?:docker|podman|nerdctl)\s+(?:container\s+)?(?:run|create)\s")
def _container_image(command: str, output: str) -> Fact | None:
    """The NVIDIA CUDA image a container is run from (``docker run --gpus all nvidia/cuda:12.9.0-base ...``): it brings
    that CUDA (and its cuda-compat libcuda) to the host's driver, as a Dockerfile's FROM does (GH601)."""
    from gpuhealth.parsers.program import image_cuda  # here: few sessions run a container

    for token in command[:2000].split():
        cuda = image_cuda(token)
        if cuda:
            return Fact({"cuda": CudaState(base_image=token, base_image_cuda=cuda, image_command=command.strip())},
                        None, f"container image {token}")
    return None


@command_fact("container-run", r"^(?:sudo\s+)?(?:(?:docker|podman|nerdctl)\s+(?:container\s+)?(?:run|create|exec)|"
                               r"nvidia-docker\s+run|(?:singularity|apptainer)\s+(?:run|exec|shell))\s|"
                               r"/usr/local/cuda/compat|/opt/nvidia/(?:nvidia_entrypoint|entrypoint\.d)")
def _container_run(command: str, output: str) -> Fact | None:
    """A container started with the GPUs (``docker run --gpus all ...``), or a command that names an NVIDIA image's
    compat directory or entrypoint: the program whose output follows ran inside a container, the context CUDA's errors
    803 and 804 are read in (parsers/container_run.py; GH601, GH603)."""
    from gpuhealth.parsers.container_run import container_line

    shown = container_line(command)
    return Fact({"container_lines": (shown,)}, None, "a container with the GPUs") if shown else None


@command_fact("library-path-set", r"LD_LIBRARY_PATH\s{0,2}=")
def _library_path(command: str, output: str) -> Fact | None:
    found = library_path_set(command)
    if not found:
        return None
    return Fact({"cuda": CudaState(ld_library_path=found)}, None, "LD_LIBRARY_PATH: " + ":".join(found))


def cuda_library_lines(lines: list[str]) -> dict[str, CudaState]:
    """The CUDA overlay for these lines: the library files of CUDA trees or CUDA wheels they name, and the directories
    a line assigns to LD_LIBRARY_PATH; empty when none."""
    files: list[str] = []
    search = library_path_lines(lines)
    for line in lines:
        if "/lib" not in line or ".so" not in line:
            continue  # cheap prefilter: most lines name no library file
        for match in _LIBRARY_FILE.finditer(line[:4096]):
            path = posixpath.normpath(match[1])  # torch/lib/../../nvidia/cusparse/lib -> nvidia/cusparse/lib
            if _CUDA_TREE.search(path) and path not in files:
                files.append(path)
        if len(files) >= MAX_LIBRARY_FILES:
            break
    if not (files or search):
        return {}
    return {"cuda": CudaState(library_files=tuple(files[:MAX_LIBRARY_FILES]), ld_library_path=search)}


# The Secure Boot state in the words of the tools that print it, wherever the line appears (a session, a log, an
# installer's output, prose quoting them): mokutil --sb-state ("SecureBoot enabled"), nvidia-installer's
# module-signing question ("This system also has UEFI Secure Boot enabled", kernel.c), the EFI stub ("UEFI Secure
# Boot is enabled"), the x86 kernel's "secureboot: Secure boot enabled" and the distributions' lockdown patch
# ("Kernel is locked down from EFI Secure Boot mode"), and shim-signed's debconf note (shim/secureboot_explanation:
# "Your system has UEFI Secure Boot enabled."). Debian's update-secureboot-policy implies it by the lines it prints only
# past its check (its own kind reads them: evidence/builtin.py, secureboot-policy).
_SB_ENABLED = guarded_re(r"\bSecureBoot enabled\b|This system also has UEFI Secure Boot enabled|"
                         r"UEFI Secure Boot is enabled|\bsecureboot: Secure boot enabled\b|"
                         r"Kernel is locked down from EFI Secure Boot|Your system has UEFI Secure Boot enabled",
                         may=has("SecureBoot", "Secure Boot", "Secure boot"))
# update-secureboot-policy (Ubuntu's and Debian's shim-signed) says "Secure Boot not enabled on this system." when the
# SecureBoot EFI variable is absent or not 1; mokutil --sb-state's "Platform is in Setup Mode" (under "SecureBoot
# disabled": the firmware holds no platform key and verifies nothing)
_SB_DISABLED = guarded_re(r"\bSecureBoot disabled\b|SecureBoot validation is disabled in shim|"
                          r"\bsecureboot: Secure boot disabled\b|UEFI Secure Boot is disabled|"
                          r"^\s*Secure Boot not enabled on this system\.|^\s*Platform is in Setup Mode\s*$",
                          may=has("SecureBoot", "Secure Boot", "Secure boot", "Setup Mode"))


def secure_boot_lines(lines: list[str], source: str) -> dict[str, InstallState]:
    """The install overlay for the Secure Boot state these lines state; empty when none does. "Disabled" wins:
    shim's "SecureBoot validation is disabled" follows mokutil's "SecureBoot enabled" when nothing is enforced."""
    state = quote = None
    for line in lines:
        text = line.strip()[:300]
        if _SB_DISABLED.search(text):
            state, quote = "disabled", text
            break
        if state is None and _SB_ENABLED.search(text):
            state, quote = "enabled", text
    if state is None:
        return {}
    return {"install": InstallState(secure_boot=state, secure_boot_source=f"{source}: {quote[:120]}")}


# Kernel lockdown (security/lockdown/lockdown.c): at boot, lock_kernel_down's "Kernel is locked down from %s; see man
# kernel_lockdown.7" (from "command line" for lockdown=, "Kernel configuration" for CONFIG_LOCK_DOWN_KERNEL_FORCE_*,
# "securityfs", or the distributions' "EFI Secure Boot mode"); and /sys/kernel/security/lockdown, whose reader lists
# the levels with the one in force in brackets ("none [integrity] confidentiality"). Both levels refuse a module
# without a trusted signature (module_sig_check asks security_locked_down(LOCKDOWN_MODULE_SIGNATURE): EPERM).
_LOCKED_DOWN_FROM = guarded_re(r"Kernel is locked down from ([\w ]{1,40}?); see man kernel_lockdown",
                               may=has("locked down from"))
# The level asked for at boot: lockdown.c's early_param "lockdown=" on a kernel command line (/proc/cmdline), and
# Bottlerocket's documented setting settings.kernel.lockdown (its API's JSON, its user data's TOML).
_LOCKDOWN_PARAM = guarded_re(r"(?:^|\s)lockdown=(integrity|confidentiality)(?:\s|$)", may=has("lockdown="))
# a command line holds other parameters (BOOT_IMAGE=, root=, ro) or the parameter alone; "lockdown=confidentiality in
# our AMI" is a person's sentence (evidence/prose.py reads it as the reporter's words)
_CMDLINE_PARAM = lazy_re(r"^\s*[\"']?lockdown=\w+[\"']?\s*$|(?:^|[\s\"'])(?!lockdown=)[\w.-]{1,40}=\S|"
                         r"(?:^|\s)(?:ro|rw|quiet|splash)(?:\s|$)")
_LOCKDOWN_SETTING = guarded_re(r"\"?lockdown\"?\s{0,4}[=:]\s{0,4}\"(integrity|confidentiality|none)\"",
                               may=has("lockdown"))
_LOCKDOWN_LEVELS = guarded_re(r"^\s*\[?none\]? \[?integrity\]? \[?confidentiality\]?\s*$",
                              may=has("integrity"))


def lockdown_lines(lines: list[str], source: str) -> dict[str, InstallState]:
    """The install overlay for the kernel's lockdown as these lines state it; empty when none does. The sysfs file's
    bracketed level wins (it says the level now); the boot line says only that the kernel was locked down, which is at
    least "integrity"; a command line's lockdown= or Bottlerocket's settings.kernel.lockdown say the level asked for."""
    state = quote = None
    for line in lines:
        text = line.strip()[:300]
        if _LOCKDOWN_LEVELS.search(text):
            level = text[text.index("[") + 1:text.index("]")] if "[" in text and "]" in text else None
            if level in ("none", "integrity", "confidentiality"):
                return {"install": InstallState(lockdown=level, lockdown_source=f"{source}: {text}")}
        found = _LOCKED_DOWN_FROM.search(text)
        if found and state is None:
            state, quote = "integrity", text[found.start():found.end() + 20]
        param = _LOCKDOWN_PARAM.search(text)
        asked = (param if param and _CMDLINE_PARAM.search(text) else None) or _LOCKDOWN_SETTING.search(text)
        if asked and state is None:
            state, quote = asked[1], text
    if state is None:
        return {}
    return {"install": InstallState(lockdown=state, lockdown_source=f"{source}: {quote[:120]}")}


# Which key signed the module against which keys shim holds: modinfo's "signer:" field (the signing certificate's
# name, as kmod reads it from the module's signature) and `mokutil --list-enrolled`, which prints each MOK as
# "[key N]", "SHA1 Fingerprint: ..." and OpenSSL's text of the certificate ("Issuer: ... CN = ...", "Subject: ...";
# mokutil's src/efi_x509.c print_x509). A module signed by none of them is refused under Secure Boot: it was signed
# with another key than the one enrolled (built before that key was made, or by another tool's key).
_MODINFO_SIGNER = guarded_re(r"^\s{0,8}signer:\s+(\S[^\n]{0,200})$", may=has("signer:"))
_CERT_NAME = guarded_re(r"^\s{0,16}(?:Subject|Issuer):[^\n]{0,300}?\bCN ?= ?([^,/\n]{1,120})", may=has("CN"))
_DKMS_CERTIFICATE = guarded_re(r"^\s{0,8}Public certificate \(MOK\): (/\S{1,300})\s*$", may=has("Public certificate"))
_LISTS_ENROLLED = ("mokutil --list-enrolled", "mokutil -l ", "SHA1 Fingerprint:")
# mokutil prints every key list the same way ("[key N]", fingerprint, certificate): the command decides whose keys
# they are. --list-new (-N) lists MokNew, the keys imported and waiting for the MOK manager's confirmation at the next
# boot (not yet trusted); --list-delete, --pk, --kek, --db, --dbx and --mokx list other databases, no enrolled MOK.
_LISTS_PENDING = guarded_re(r"\bmokutil\b[^|;&\n]{0,80}?(?:--list-new\b|(?<!\S)-N\b)", may=has("mokutil"))
_LISTS_OTHER = guarded_re(r"\bmokutil\b[^|;&\n]{0,80}?(?:--list-delete\b|--pk\b|--kek\b|--dbx?\b|--mokx\b|"
                          r"(?<!\S)-[DX]\b)", may=has("mokutil"))


# The MOKs the kernel took in, as it says at boot (security/integrity/platform_certs/load_uefi.c, digsig.c): "integrity:
# Loading X.509 certificate: UEFI:MokListRT (MOKvar table)" opens the MOK list, then one "integrity: Loaded X.509 cert
# '<name>: <subject key id>'" per key (the name is the certificate's CN, or "O: CN" where the CN does not start with
# the O: x509_fabricate_name), until the next list ("UEFI:db", "UEFI:MokListXRT", ...) opens.
_LOADING_LIST = guarded_re(r"Loading X\.509 certificate: UEFI:(\w{1,30})", may=has("Loading X.509 certificate"))
_LOADED_CERT = guarded_re(r"Loaded X\.509 cert '([^'\n]{1,300}?)(?:: [0-9a-f]{8,80})?'", may=has("Loaded X.509 cert"))


KERNEL_MOKS = "the MOKs the kernel loaded at boot (UEFI:MokListRT)"


def _kernel_moks(lines: list[str]) -> list[str]:
    """The names of the MOKs the kernel loaded (the CN of each), in the order it printed them; empty when the lines
    do not show the MOK list being loaded."""
    names: list[str] = []
    in_moks = False
    for line in lines[:2000]:
        opened = _LOADING_LIST.search(line)
        if opened:
            in_moks = opened[1] == "MokListRT"
            continue
        loaded = _LOADED_CERT.search(line) if in_moks else None
        if loaded:
            name = loaded[1].rsplit(": ", 1)[-1].strip()
            if name and name not in names:
                names.append(name)
    return names


def module_key_lines(lines: list[str], source: str, command: str = "") -> dict[str, InstallState]:
    """The install overlay for the nvidia module's signer (a modinfo of nvidia), the certificate DKMS signs with and the
    names of the enrolled MOKs (the
    certificates' subject and issuer names of a `mokutil --list-enrolled`); empty when the lines hold neither.
    ``command``: the command the lines are the output of, where the caller knows it (else the source names it)."""
    found: dict[str, Any] = {}
    source_and_command = f"{source} {command}"
    pending = bool(_LISTS_PENDING.search(source_and_command))
    listing = not _LISTS_OTHER.search(source_and_command) and (pending or any(
        word in source_and_command for word in _LISTS_ENROLLED[:2]) or any(
        line.lstrip().startswith(_LISTS_ENROLLED[2]) for line in lines[:2000]))
    names: list[str] = []
    # a modinfo cut to its signer ("modinfo nvidia | grep signer"): whole, modinfo's own reader takes it
    modinfo = "modinfo" in source_and_command and "nvidia" in source_and_command
    for line in lines[:2000]:
        text = line[:400]
        signer = _MODINFO_SIGNER.search(text) if modinfo else None
        if signer and "module_signer" not in found:
            found["module_signer"] = signer[1].strip()
        certificate = _DKMS_CERTIFICATE.search(text)
        if certificate and "signing_certificate" not in found:
            found["signing_certificate"], found["signing_certificate_source"] = certificate[1], source
        if listing:
            name = _CERT_NAME.search(text)
            if name and name[1].strip() not in names:
                names.append(name[1].strip())
    kernel = not names and not listing
    if kernel:
        names = _kernel_moks(lines)  # the kernel's own word on the MOKs it trusts, at boot
    if names and pending:  # imported, not confirmed: shim does not trust them until the MOK manager enrolls them
        found.update(signing_key=f"the key '{names[0]}'", signing_key_state="pending",
                     signing_key_line=f"mokutil --list-new: CN = {names[0]}", signing_key_source=source)
    elif names:
        found["enrolled_keys"] = tuple(names[:20])
        found["enrolled_keys_source"] = f"{source}: {KERNEL_MOKS}" if kernel else source
    return {"install": InstallState(**found)} if found else {}


# every answer of mokutil --test-key, and of --import (--delete) for a key it skips
# `mokutil --import KEY` asks for the one-time password ("input password:", "input password again:", lcp/mokutil
# src/mokutil.c get_password) once the key goes into the enrollment request: the key waits for the MOK manager's
# confirmation at the next boot. The key is the command's argument (a session's block names its command).
_IMPORT_COMMAND = guarded_re(r"\bmokutil\b[^|;&\n]{0,80}?(?:--import|(?<!\S)-i)\s{1,4}(?!-)(\S{1,300})",
                             may=has("mokutil"))


def _import_asked(lines: list[str], source: str) -> dict[str, InstallState]:
    command = _IMPORT_COMMAND.search(source)
    if command is None or not any(line.strip().startswith("input password:") for line in lines[:20]):
        return {}
    return {"install": InstallState(signing_key=command[1], signing_key_state="pending",
                                    signing_key_line=f"mokutil --import {command[1]}: input password:",
                                    signing_key_source=source)}


_TEST_KEY_WORDS = (" is not enrolled", " is already ", " is blocked", " is not in MokList",
                   "Already in kernel trusted keyring", "System's DKMS key is NOT", "System DKMS key is registered")


# Ubuntu's shim-signed makes the MOK its DKMS signs with and asks for its enrolment: update-secureboot-policy --new-key
# says "Generating a new Secure Boot signing key:" as it writes /var/lib/shim-signed/mok/MOK.der (DKMS's sign_build
# runs it), and the enrolment's debconf note says "a new Machine-Owner Key (MOK) has been generated. This key now needs
# to be enrolled in your system's firmware." (shim/secureboot_explanation; shim/enable_secureboot asks "Enroll a new
# Machine-Owner Key?"). Either says that key was not enrolled then; a mokutil answer about it says what it is now.
UBUNTU_MOK = "/var/lib/shim-signed/mok/MOK.der"
_UBUNTU_NEW_MOK = guarded_re(r"^\W{0,4}Generating a new Secure Boot signing key:|Machine-Owner Key \(MOK\) has been "
                             r"generated|Enroll a new Machine-Owner Key\?",
                             may=has("Secure Boot signing key", "Machine-Owner Key"))


# DKMS 3 (dell/dkms dkms.in prepare_mok, v3.0.4 to v3.2.2) makes its MOK where the key or certificate is missing:
# "Certificate or key are missing, generating self signed certificate for MOK..." after "Public certificate (MOK):
# PATH" (PATH is made now), or on Ubuntu "Certificate or key are missing, generating them using
# update-secureboot-policy..." (/var/lib/shim-signed/mok/MOK.der, whose enrolment it then asks for). A key made now is
# not enrolled: shim refuses the modules signed with it until the MOK manager enrolls it.
_DKMS_NEW_MOK = guarded_re(r"^\s*Certificate or key are missing, generating (?P<how>self signed certificate for MOK|"
                           r"them using update-secureboot-policy)", may=has("Certificate or key are missing"))


def _new_dkms_mok(lines: list[str], source: str) -> dict[str, InstallState]:
    certificate = "/var/lib/dkms/mok.pub"  # dkms.in's default mok_certificate
    for line in lines[:2000]:
        named = _DKMS_CERTIFICATE.search(line[:400])
        if named:
            certificate = named[1]
        made = _DKMS_NEW_MOK.search(line[:400])
        if made:
            key = certificate if made["how"].startswith("self") else UBUNTU_MOK
            return {"install": InstallState(signing_key=key, signing_key_state="not-enrolled",
                                            signing_key_line=line.strip()[:200], signing_key_source=source)}
    return {}


def _new_ubuntu_mok(lines: list[str], source: str) -> dict[str, InstallState]:
    line = next((line.strip(" \t│|#") for line in lines[:2000] if _UBUNTU_NEW_MOK.search(line[:400])), None)
    if line is None:
        return {}
    return {"install": InstallState(signing_key=UBUNTU_MOK, signing_key_state="not-enrolled",
                                    signing_key_line=line[:200], signing_key_source=source)}


def signing_key_lines(lines: list[str], source: str) -> dict[str, InstallState]:
    """The install overlay for what ``mokutil --test-key`` said of a signing key, wherever its line appears (its
    own output, a session, prose quoting it); empty when no line does. Of several keys, the least trusted. Ubuntu's
    new MOK, made and waiting for its enrolment, where no mokutil line says more."""
    candidates = [line for line in lines[:2000] if any(words in line for words in _TEST_KEY_WORDS)]
    if not candidates:
        return _import_asked(lines, source) or _new_dkms_mok(lines, source) or _new_ubuntu_mok(lines, source)
    from gpuhealth.parsers.install import least_trusted_key  # here: most pieces hold no such line

    answer = least_trusted_key(candidates)
    if answer is None:
        return {}
    key, state, line = answer
    return {"install": InstallState(signing_key=key, signing_key_state=state, signing_key_line=line,
                                    signing_key_source=source)}
