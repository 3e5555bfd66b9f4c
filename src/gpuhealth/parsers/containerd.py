"""containerd's CRI runtimes as Kubernetes uses them (GH802): its configuration file and ``crictl info``.

A pod's containers run under the runtime its RuntimeClass names (``spec.runtimeClassName``; its ``handler`` is a
runtime of containerd's CRI configuration), else under containerd's default runtime (Kubernetes documentation,
"Runtime Class", https://kubernetes.io/docs/concepts/containers/runtime-class/). The NVIDIA Container Toolkit gives a
pod its GPUs only when that runtime is the NVIDIA runtime, which ``nvidia-ctk runtime configure --runtime=containerd``
adds as ``runtimes.nvidia`` (``--set-as-default`` also makes it ``default_runtime_name``; NVIDIA
nvidia-container-toolkit, pkg/config/engine/containerd/config.go and containerd.go). Where that section lives depends
on the file's ``version`` (containerd docs/cri/config.md, https://github.com/containerd/containerd/blob/main/docs/cri/config.md):

- no version or ``version = 1`` (containerd 1.x before 1.3): ``[plugins.cri.containerd]``;
- ``version = 2`` (containerd 1.x): ``[plugins."io.containerd.grpc.v1.cri".containerd]``;
- ``version = 3`` (containerd 2.x): ``[plugins.'io.containerd.cri.v1.runtime'.containerd]``.

Each holds ``default_runtime_name`` (containerd's own default: ``runc``) and one table per runtime,
``runtimes.<name>``, whose ``options.BinaryName`` is the program run (``/usr/bin/nvidia-container-runtime`` for the
NVIDIA one). Before containerd 1.4 the default runtime was its own table, ``containerd.default_runtime``. A file with
``imports`` reads more files (``nvidia-ctk`` 1.17 and later writes its runtime to
``/etc/containerd/conf.d/99-nvidia.toml``), so a runtime missing from the main file may be in one of them.

``crictl info`` prints the running CRI plugin's configuration as JSON: ``config.containerd.defaultRuntimeName`` and
``config.containerd.runtimes`` (containerd's CRI config, json tags ``defaultRuntimeName``, ``runtimes``, ``options``).

The CRI plugin's ``enable_cdi`` (``config.enableCDI``) says containerd injects CDI devices itself: the GPU operator with
CDI on (its default since v25.10) gives pods their GPUs as CDI devices under the default runtime and leaves runc the
default, its own pods naming RuntimeClass nvidia (NVIDIA gpu-operator controllers/object_controls.go,
transformToolkitCtrForCDI; its toolkit writes ``enable_cdi = true`` and the runtimes nvidia, nvidia-cdi and
nvidia-legacy: nvidia-container-toolkit pkg/config/engine/containerd/config.go EnableCDI,
cmd/nvidia-ctk-installer/container/operator/operator.go).

The configuration is read line by line rather than as TOML, so a paste cut short, wrapped in markdown or holding a
k3s template line still gives what it shows. Every function is pure and linear in its input.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from dataclasses import replace

from gpuhealth.model import HostEnvironment, ParseError

MAX_LINES = 4000
MAX_LINE = 1000
# the CRI plugin's name, per configuration version (nvidia-container-toolkit, containerd.go criRuntimePluginName)
CRI_PLUGINS = ("cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")
CONTAINERD_DEFAULT = "runc"  # default_runtime_name when the file does not set it (containerd's default config)
NVIDIA_BINARY = "nvidia-container-runtime"


def _split_key(text: str) -> tuple[str, ...] | None:
    """A TOML dotted key (``plugins."io.containerd.grpc.v1.cri".containerd``) -> its parts; None when it is not one."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    quoted = False
    for char in text.strip():
        if quote:
            if char == quote:
                quote = ""
            else:
                current.append(char)
        elif char in "\"'":
            quote, quoted = char, True
        elif char == ".":
            parts.append("".join(current).strip())
            current, quoted = [], False
        elif char.isalnum() or char in "_-" or char.isspace():
            current.append(char)
        else:
            return None
    if quote:
        return None
    parts.append("".join(current).strip())
    if not all(parts) and not quoted:
        return None
    return tuple(parts)


def _string_value(text: str) -> str | None:
    """The value of ``key = "value"`` (or 'value'); None for a value that is no string."""
    value = text.strip()
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        return value[1:-1]
    # a comment after the value: `default_runtime_name = "nvidia" # set by nvidia-ctk`
    if value[:1] in "\"'":
        end = value.find(value[0], 1)
        if end > 0 and value[end + 1:].strip().startswith("#"):
            return value[1:end]
    return None


def _strings(text: str) -> list[str]:
    """The quoted strings of an array line: ``imports = ["/etc/containerd/conf.d/*.toml"]``."""
    found, quote, current = [], "", []
    for char in text:
        if quote:
            if char == quote:
                found.append("".join(current))
                quote, current = "", []
            else:
                current.append(char)
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
    return found


class _Reader:
    """What the lines say about the CRI plugin's runtimes, gathered as the lines are read."""

    def __init__(self) -> None:
        self.runtimes: dict[str, str] = {}  # runtime name -> its BinaryName ("" when not shown)
        self.default: str | None = None
        self.legacy_default = ""  # containerd.default_runtime's BinaryName/Runtime/runtime_engine (before 1.4)
        self.saw_containerd_table = False  # [... .containerd] itself, the table default_runtime_name belongs in
        self.saw_cri = False
        self.imports: list[str] = []
        self.disabled: list[str] = []  # disabled_plugins: Docker's packaged config.toml disables "cri"
        self.version: int | None = None
        self.cdi = False  # the CRI plugin's enable_cdi: containerd injects CDI devices (the GPU operator's) itself

    def key(self, path: tuple[str, ...], value: str) -> None:
        if len(path) == 3 and path[0] == "plugins" and path[1] in CRI_PLUGINS and path[2] == "enable_cdi":
            self.cdi = value.partition("#")[0].strip() == "true"
            return
        if path == ("version",):
            self.version = int(value.strip()) if value.strip().isdecimal() else None
            return
        if path == ("imports",):
            self.imports += _strings(value)
            return
        if path == ("disabled_plugins",):
            self.disabled += _strings(value)
            return
        rest = _cri_rest(path)
        if rest is None:
            return
        text = _string_value(value)
        if rest == ("default_runtime_name",):
            bare = value.partition("#")[0].strip()  # a hand edit without quotes still names the runtime it means
            self.default = text or (bare if bare.replace("-", "").replace("_", "").isalnum() else None)
        elif len(rest) >= 2 and rest[0] == "runtimes":
            binary = self.runtimes.setdefault(rest[1], "")
            if rest[2:] in (("options", "BinaryName"), ("options", "Runtime")) and text and not binary:
                self.runtimes[rest[1]] = text
        elif rest[:1] == ("default_runtime",) and rest[-1] in ("BinaryName", "Runtime", "runtime_engine") and text:
            self.legacy_default = text

    def table(self, path: tuple[str, ...]) -> None:
        rest = _cri_rest(path)
        if rest is None:
            return
        if rest == ():
            self.saw_containerd_table = True
        elif len(rest) >= 2 and rest[0] == "runtimes":
            self.runtimes.setdefault(rest[1], "")


def _cri_rest(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The part of a key path below the CRI plugin's ``containerd`` table, or None when the path is not under it."""
    if len(path) >= 3 and path[0] == "plugins" and path[1] in CRI_PLUGINS and path[2] == "containerd":
        return path[3:]
    return None


def is_nvidia_runtime(name: str, binary: str) -> bool:
    """A runtime that runs the NVIDIA Container Runtime: named nvidia (nvidia, nvidia-cdi, nvidia-legacy: the names
    the toolkit and the GPU operator give it) or running its binary."""
    return name.lower().startswith("nvidia") or posixpath.basename(binary).startswith(NVIDIA_BINARY)


def _stripped_lines(text: str) -> Iterator[str]:
    """The configuration's lines, stripped, within the limits (MAX_LINES lines of MAX_LINE characters)."""
    for raw in text.splitlines()[:MAX_LINES]:
        yield raw[:MAX_LINE].strip()


def _toml_line(line: str) -> tuple[bool, tuple[str, ...] | None, str]:
    """(is a table header, its path or the key's path, the key's value) of a stripped TOML line; the path is None
    where neither a header nor a ``key = value`` parses. An array-of-tables header (``[[...]]``) is neither."""
    if line.startswith("[") and not line.startswith("[["):
        end = line.find("]")
        return True, (_split_key(line[1:end]) if end > 0 else None), ""
    key, equals, value = line.partition("=")
    return False, (_split_key(key) if equals else None), value


def parse_containerd_config(text: str, source: str = "/etc/containerd/config.toml") -> HostEnvironment:
    """containerd's config.toml (or ``containerd config dump``): the CRI plugin's runtimes, which run the NVIDIA
    runtime, the default runtime and the files it imports. ParseError when no CRI runtime section is in it."""
    if not isinstance(text, str):
        raise ParseError("containerd's configuration must be text")
    reader = _Reader()
    table: tuple[str, ...] = ()
    pending_imports = False
    for line in _stripped_lines(text):
        if pending_imports:
            reader.imports += _strings(line)
            pending_imports = "]" not in line
            continue
        if not line or line.startswith("#"):
            continue
        header, path, value = _toml_line(line)
        if header:
            if path is not None:
                table = path
                reader.table(table)
            continue
        if path is None:
            continue
        reader.key(table + path, value)
        if table + path == ("imports",) and "]" not in value:
            pending_imports = True
    if any(name in CRI_PLUGINS for name in reader.disabled):
        raise ParseError("the CRI plugin is disabled (disabled_plugins): containerd serves no Kubernetes pods")
    if not (reader.runtimes or reader.default or reader.legacy_default or reader.saw_containerd_table):
        raise ParseError("no CRI runtime section (plugins.\"io.containerd.grpc.v1.cri\".containerd, "
                         "plugins.'io.containerd.cri.v1.runtime'.containerd or plugins.cri.containerd)")
    return _environment(reader, source)


def _environment(reader: _Reader, source: str) -> HostEnvironment:
    runtimes = dict(reader.runtimes)
    default = reader.default
    if default is None and reader.legacy_default:
        default = "default_runtime"  # containerd before 1.4: the default runtime's own table
        runtimes[default] = reader.legacy_default
    implied = default is None and reader.saw_containerd_table
    if implied:
        default = CONTAINERD_DEFAULT
    nvidia = tuple(sorted(name for name, binary in runtimes.items() if is_nvidia_runtime(name, binary)))
    if default is not None and default in runtimes and default not in nvidia and \
            is_nvidia_runtime(default, runtimes[default]):
        nvidia = (*nvidia, default)
    return HostEnvironment(containerd_config_source=source, containerd_runtimes=tuple(sorted(runtimes)),
                           containerd_nvidia_runtimes=nvidia, containerd_default_runtime=default,
                           containerd_default_implied=implied, containerd_imports=tuple(reader.imports[:20]),
                           cri_cdi_enabled=reader.cdi)


def parse_crictl_info(text: str) -> HostEnvironment:
    """``crictl info``'s JSON: the running CRI plugin's runtimes and default runtime."""
    if not isinstance(text, str):
        raise ParseError("crictl info output must be text")
    try:
        data = json.loads(text.strip())
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"crictl info: not JSON ({exc})") from exc
    config = data.get("config") if isinstance(data, dict) else None
    containerd = config.get("containerd") if isinstance(config, dict) else None
    if not isinstance(containerd, dict):
        raise ParseError("crictl info: no config.containerd object (a runtime other than containerd?)")
    reader = _Reader()
    reader.cdi = config.get("enableCDI") is True if isinstance(config, dict) else False
    default = containerd.get("defaultRuntimeName")
    reader.default = default if isinstance(default, str) and default else None
    reader.saw_containerd_table = True
    runtimes = containerd.get("runtimes")
    for name, runtime in (runtimes.items() if isinstance(runtimes, dict) else ()):
        options = runtime.get("options") if isinstance(runtime, dict) else None
        binary = options.get("BinaryName") if isinstance(options, dict) else None
        reader.runtimes[str(name)] = binary if isinstance(binary, str) else ""
    return _environment(reader, "crictl info")


# --------------------------------------------------------------------------- CRI-O
# CRI-O's configuration (crio.conf(5), https://github.com/cri-o/cri-o/blob/main/docs/crio.conf.5.md): the [crio.runtime]
# table's default_runtime names the runtime a pod runs under when it names no RuntimeClass, and each runtime is a table
# [crio.runtime.runtimes.<name>] whose runtime_path is the program run (the handler a RuntimeClass names). CRI-O reads
# /etc/crio/crio.conf, then every file of /etc/crio/crio.conf.d in name order, a later value overriding an earlier one;
# `nvidia-ctk runtime configure --runtime=crio` writes its runtime (and, with --set-as-default, default_runtime) to the
# drop-in /etc/crio/crio.conf.d/99-nvidia.toml (NVIDIA nvidia-container-toolkit, cmd/nvidia-ctk/runtime/configure and
# pkg/config/engine/crio/crio.go; its docs, "Configuring CRI-O"). Releases before 1.14 named the default runtime's
# program directly: [crio.runtime] runtime = "/usr/bin/runc".
CRIO_DROP_INS = "/etc/crio/crio.conf.d"
CRIO_DEFAULT = "crun or runc"  # default_runtime unset: CRI-O's own default (crun in current releases, runc before)
# the running daemon's configuration, drop-ins merged: `crio status config` (and `crio config`, which prints the
# configuration the binary loads from the same files)
CRIO_MERGED = ("crio status config", "crio-status config", "crio config")


def is_crio_config(text: str) -> bool:
    """Whether ``text`` holds one of CRI-O's runtime tables (cheap; no parse)."""
    return "[crio.runtime" in text[:65536]


class _CrioReader(_Reader):
    """CRI-O's keys, read into the same facts as containerd's."""

    def crio_key(self, path: tuple[str, ...], value: str) -> None:
        if path[:2] != ("crio", "runtime"):
            return
        rest, text = path[2:], _string_value(value)
        if rest == ("default_runtime",):
            self.default = text or None
        elif rest == ("runtime",) and text:  # before CRI-O 1.14: the default runtime's program
            self.legacy_default = text
        elif len(rest) >= 2 and rest[0] == "runtimes":
            binary = self.runtimes.setdefault(rest[1], "")
            if rest[2:] == ("runtime_path",) and text:
                self.runtimes[rest[1]] = text or binary

    def crio_table(self, path: tuple[str, ...]) -> None:
        if path == ("crio", "runtime"):
            self.saw_containerd_table = True
        elif path[:3] == ("crio", "runtime", "runtimes") and len(path) >= 4:
            self.runtimes.setdefault(path[3], "")


def _read_crio(reader: _CrioReader, text: str) -> None:
    table: tuple[str, ...] = ()
    for line in _stripped_lines(text):
        if not line or line.startswith("#"):
            continue
        header, path, value = _toml_line(line)
        if header:
            if path is not None:
                table = path
                reader.crio_table(table)
        elif path is not None:
            reader.crio_key(table + path, value)


def parse_crio_config(text: str, source: str = "/etc/crio/crio.conf") -> HostEnvironment:
    """CRI-O's configuration (crio.conf, a crio.conf.d drop-in or ``crio status config``) into the facts containerd's
    gives (``cri_engine`` "cri-o"). A file other than the merged configuration is not all of it: CRI-O also reads the
    drop-ins of /etc/crio/crio.conf.d, which may add the nvidia runtime (recorded as an import, as a containerd file
    that imports others). ParseError when no [crio.runtime] table is in it."""
    if not isinstance(text, str):
        raise ParseError("CRI-O's configuration must be text")
    return parse_crio_configs((text,), source, merged=any(command in source for command in CRIO_MERGED))


def parse_crio_configs(texts: tuple[str, ...], source: str, merged: bool) -> HostEnvironment:
    """CRI-O's configuration files in the order CRI-O reads them (crio.conf, then its drop-ins by name); ``merged``:
    they are all of it (the live host read every drop-in, or the text is the daemon's merged configuration)."""
    reader = _CrioReader()
    for text in texts:
        _read_crio(reader, text)
    if not (reader.runtimes or reader.default or reader.legacy_default or reader.saw_containerd_table):
        raise ParseError("no [crio.runtime] table")
    if not merged:
        reader.imports.append(CRIO_DROP_INS + "/*")
    env = _environment(reader, source)
    if env.containerd_default_implied:
        env = replace(env, containerd_default_runtime=CRIO_DEFAULT)
    return replace(env, cri_engine="cri-o")
