"""Test hosts: a small JSON spec per case (tests/hosts/*.json) becomes a ``FakeHost``.

A spec names real corpus files (``"corpus:<path>"``) or gives literal text. ``FakeHost`` answers the
same questions a real machine does, so a case can be recorded into a real bundle and replayed: the
tests exercise the whole path, host -> bundle -> snapshot -> checks.

Spec keys (all optional):
  files     {host path: text}
  file_errors  {host path: reason}  (read() fails with it: "permission denied: run as root (sudo)")
  pci       [{address, device, class, driver, name, speed, max_speed, width, max_width}]
  modules   [module names]          -> /proc/modules
  dev       [names under /dev]
  commands  {"argv joined by spaces": {stdout, stderr, exit_code, timed_out, error}}
  nvml      {"from_query": file} | {"from_xml": file} | a literal NvmlReport JSON
  links     {path: link target}     (readlink; added to the PCI drivers' links)
  stats     {path: {mtime, size, is_dir}}   (stat; other paths are "not present")
  listings  {directory: [names]}    (listdir; added to those made from pci and dev)
  env       {name: value}           (environment(); without it the default below)
  expect    {"fires": {code: severity}, "quiet": [codes]}
  captured_at  the moment the host is observed (default 2026-11-30T12:00:00+0000)

The PyTorch probe runs ``python3 -c <its script>``; in ``commands`` its key is ``python3 -c <torch-probe>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuhealth.host import FileContent, FileStat, Listing
from gpuhealth.model import CommandRun, NvmlReport, to_jsonable
from gpuhealth.parsers.cuda import TORCH_PROBE_SCRIPT
from repo_paths import CORPUS

HOSTS = Path(__file__).parent / "hosts"


def text_of(value: str) -> str:
    if value.startswith("corpus:"):
        return (CORPUS / value.removeprefix("corpus:")).read_text(encoding="utf-8", errors="replace")
    return value


def load_spec(name: str) -> dict[str, Any]:
    return json.loads((HOSTS / f"{name}.json").read_text())


def case_names() -> list[str]:
    return sorted(p.stem for p in HOSTS.glob("*.json"))


class FakeHost:
    """A host made of a spec: files, a PCI bus, modules, device nodes, commands and NVML."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.files: dict[str, str] = {k: text_of(v) for k, v in spec.get("files", {}).items()}
        self.file_errors: dict[str, str] = dict(spec.get("file_errors", {}))
        self.listings: dict[str, tuple[str, ...]] = {}
        self.links: dict[str, str] = {}
        self._pci(spec.get("pci"))
        if "modules" in spec:
            self.files["/proc/modules"] = "".join(
                f"{m} 16384 0 - Live 0x0000000000000000\n" for m in spec["modules"])
        if "dev" in spec:
            self.listings["/dev"] = tuple(sorted(["null", "zero", *spec["dev"]]))
        self.commands = spec.get("commands", {})
        # Test hosts live at a fixed moment, so date-dependent checks (OS end of life) never drift.
        self.captured_at: str = spec.get("captured_at", "2026-11-30T12:00:00+0000")
        self.nvml_answer = _nvml(spec.get("nvml"))
        self.links.update(spec.get("links", {}))
        self.listings.update({k: tuple(v) for k, v in spec.get("listings", {}).items()})
        self.stats: dict[str, dict[str, Any]] = spec.get("stats", {})
        self.env: dict[str, str] | None = spec.get("env")

    def _pci(self, devices: list[dict[str, Any]] | None) -> None:
        if devices is None:
            return
        base = "/sys/bus/pci/devices"
        self.listings[base] = tuple(["0000:00:00.0", *(d["address"] for d in devices)])
        self.files[f"{base}/0000:00:00.0/vendor"] = "0x8086\n"  # a host bridge that is not NVIDIA
        for d in devices:
            path = f"{base}/{d['address']}"
            self.files[f"{path}/vendor"] = "0x10de\n"
            self.files[f"{path}/device"] = f"0x{d['device']}\n"
            self.files[f"{path}/class"] = f"0x{d.get('class', '0302')}00\n"
            for key, attr in (("speed", "current_link_speed"), ("max_speed", "max_link_speed"),
                              ("width", "current_link_width"), ("max_width", "max_link_width")):
                if key in d:
                    self.files[f"{path}/{attr}"] = f"{d[key]}\n"
            if d.get("driver"):
                self.links[f"{path}/driver"] = f"../../../bus/pci/drivers/{d['driver']}"

    def read(self, path: str) -> FileContent:
        if path in self.file_errors:
            return FileContent(path, error=self.file_errors[path])
        if path in self.files:
            return FileContent(path, self.files[path].encode())
        return FileContent(path, error="not present")

    def listdir(self, path: str) -> Listing:
        if path in self.listings:
            return Listing(path, self.listings[path])
        return Listing(path, error="not present")

    def readlink(self, path: str) -> str | None:
        return self.links.get(path)

    def stat(self, path: str) -> FileStat:
        entry = self.stats.get(path)
        if entry is None:
            return FileStat(path, error="not present")
        return FileStat(path, entry.get("mtime"), entry.get("size"), entry.get("is_dir"))

    def run(self, argv: list[str], timeout: float = 10.0) -> CommandRun:
        entry = self.commands.get(" ".join("<torch-probe>" if a == TORCH_PROBE_SCRIPT else a for a in argv))
        if entry is None:
            return CommandRun(tuple(argv), None, error="not installed")
        if entry.get("timed_out"):
            return CommandRun(tuple(argv), None, duration_s=timeout, timed_out=True,
                              error=f"timed out after {timeout:g} s")
        return CommandRun(tuple(argv), entry.get("exit_code", 0), text_of(entry.get("stdout", "")),
                          text_of(entry.get("stderr", "")), 0.05, False, entry.get("error"))

    def nvml(self) -> dict[str, Any]:
        return self.nvml_answer

    def environment(self) -> dict[str, str]:
        if self.env is not None:
            return dict(self.env)
        return {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "hf_secret"}


def _nvml(spec: dict[str, Any] | None) -> dict[str, Any]:
    """NVML's answer: derived from a real nvidia-smi capture, or given literally."""
    if spec is None:
        return {"ok": False, "error": "NVML Shared Library Not Found", "error_code": 12}
    if "from_query" in spec or "from_xml" in spec:
        if "from_query" in spec:
            from gpuhealth.parsers.smi_query import parse_smi_query as parse
        else:
            from gpuhealth.parsers.smi_xml import parse_smi_xml as parse
        report = parse(text_of(spec.get("from_query") or spec["from_xml"]))
        return to_jsonable(NvmlReport(ok=True, driver_version=spec.get("driver_version", report.driver_version),
                                      cuda_driver_version=report.cuda_version, gpus=report.gpus))
    return spec
