"""A line counts as read by its kind's parser when the parser's output changes without it (analyze._read_by): it is
then left to the checks that judge that kind, never read as a pasted line (an error line gpuhealth does not know, a
catalogue line the checks did not see). A parser that stores a line in a field no check reads hides it. The sweep: for
every evidence kind's real example (tests/test_evidence_kinds.py) and the error examples below, each field that one
line's removal changes is read by a check (its name is an attribute the checks read), or is one of UNJUDGED: values
kept as they are, each saying why its line never holds a fault no check sees. Parsing a piece without one of its lines
raises nothing but ParseError (analyze does it for every line it asks about).

Found by the sweep and fixed: the NVLink reason nvidia-smi prints instead of a GPU's links was kept as printed and
read by no check but for "all links are inactive" (GH408 now shows any other as a warning); docker info's WARNING
lines and modinfo's vermagic were kept and read by nobody (their parsers no longer keep them); /proc/cmdline's parser
raised IndexError without its one line (an internal error on a pasted command line with an error word).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import gpuhealth
from gpuhealth.analyze import _read_by, analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import KINDS, load
from gpuhealth.model import ParseError, Severity
from test_evidence_kinds import EXAMPLES, _example

load()
CHECKS = Path(gpuhealth.__file__).parent / "checks"
MAX_LINES = 200  # lines of each example asked about (analyze asks about at most its probes' limit)

# Type.field -> why a line stored only there hides no fault from the checks
UNJUDGED = {
    "TorchEnv.gpu_names": "collect_env's GPU list: the GPUs are judged from nvidia-smi and NVML, never from it",
    "TorchEnv.python_version": "collect_env's Python version: a value, no message",
    "KernelLog.lines_scanned": "how much of the log was read (the report's extent), not what a line says",
    "KernelLog.bytes_scanned": "how much of the log was read (the report's extent), not what a line says",
    "InstallState.module_version": "modinfo's version of the module on disk: evidence/prose.py reads it as the "
                                   "driver version a person's words are judged against",
    # parsers/kube.py keeps the pod's phase and reason for no check yet: the reason repeats the Events row's and the
    # Message: line beside it, which the catalogue reads (a check reading it is the better fix: left to its author)
    "HostEnvironment.k8s_pod_status": "kubectl describe pod's Status/Reason: the same reason is an Events row and a "
                                      "Message: line, both read as pasted lines",
    "DriverInfo.compiler": "/proc/driver/nvidia/version's GCC line, read as that banner (parsers/banners.py)",
    "Gpu.serial": "a value nvidia-smi reports; an error in its place is a field error (Gpu.field_errors, GH404)",
    "Gpu.vbios_version": "a value nvidia-smi reports; an error in its place is a field error (GH404)",
    "Gpu.ecc_mode_current": "a value nvidia-smi reports; an error in its place is a field error (GH404)",
    "Gpu.temperature_max_operating_c": "a value nvidia-smi reports; an error in its place is a field error (GH404)",
    "Gpu.utilization_memory_pct": "a reading the monitor samples; an error in its place is a field error (GH404)",
    "Gpu.pcie_replay_counter": "a counter the monitor samples; an error in its place is a field error (GH404)",
}

# error output a kind's example does not hold: (kind, text), each written for this test in the form the tool prints
ERROR_EXAMPLES = [
    ("smi-nvlink", "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537486)\n"
                   "Failed to get NVLink state: Unknown Error\n"
                   "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537487)\n"
                   "\t Link 0: 25 GB/s\n"),
]


def _read_by_checks() -> set[str]:
    """Every attribute name the checks read (``x.name``, ``getattr(x, "name")``)."""
    names: set[str] = set()
    for path in CHECKS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)
    return names


READ = _read_by_checks()


def changed(before: object, after: object, where: str = "") -> set[str]:
    """The Type.field paths (or overlay names) whose values differ between two parses."""
    if dataclasses.is_dataclass(before) and type(before) is type(after):
        out: set[str] = set()
        for f in dataclasses.fields(before):
            x, y = getattr(before, f.name), getattr(after, f.name)
            if x != y:
                out |= changed(x, y, f"{type(before).__name__}.{f.name}")
        return out
    if isinstance(before, (tuple, list)) and isinstance(after, (tuple, list)) and len(before) == len(after):
        return set().union(*(changed(x, y, where) for x, y in zip(before, after, strict=True) if x != y))
    if isinstance(before, dict) and isinstance(after, dict) and before.keys() == after.keys():
        return set().union(*(changed(before[k], after[k], where or str(k)) for k in before if before[k] != after[k]))
    return {where or "?"}


def texts() -> list[tuple[str, str]]:
    return [(kind, _example(kind)) for kind in sorted(EXAMPLES)] + ERROR_EXAMPLES


@pytest.mark.parametrize(("kind", "text"), texts(), ids=[f"{k}-{i}" for i, (k, _) in enumerate(texts())])
def test_every_line_the_parser_reads_lands_in_a_field_a_check_reads(kind, text):
    lines = text.splitlines(keepends=True)
    whole = KINDS[kind].parse(text, "example")
    unread = []
    for i, line in enumerate(lines[:MAX_LINES]):
        if not line.strip():
            continue
        try:  # what analyze._read_by does: the piece without the line
            without = KINDS[kind].parse("".join(x for j, x in enumerate(lines) if j != i), "example")
        except ParseError:
            continue
        for path in changed(whole, without) if without != whole else ():
            field = path.rsplit(".", 1)[-1]
            if path not in UNJUDGED and "." in path and field not in READ:
                unread.append(f"{path} <- {line.strip()[:80]!r}")
    assert not unread, f"{kind}: lines the parser keeps where no check reads them:\n" + "\n".join(unread)


def test_the_unjudged_fields_are_fields_and_no_check_reads_them():
    """The list says what it says: each entry names a real field, and one no check reads (else it need not be here)."""
    from gpuhealth import model

    for path in UNJUDGED:
        name, field = path.split(".")
        assert field in {f.name for f in dataclasses.fields(getattr(model, name))}, path
        assert field not in READ, f"{path}: a check reads it now; take it off UNJUDGED"


def test_an_nvlink_error_is_judged_by_gh408_not_hidden():
    kind, text = ERROR_EXAMPLES[0]
    whole = KINDS[kind].parse(text, "example")
    assert _read_by(KINDS[kind], text, "example", whole)("Failed to get NVLink state: Unknown Error")
    snapshot, _ = analyze_texts([("nvlink.txt", "$ nvidia-smi nvlink -s\n" + text)])
    gh408 = [f for f in run_checks(snapshot).findings if f.code == "GH408"]
    assert [f.severity for f in gh408] == [Severity.WARNING], gh408
    assert "Unknown Error" in gh408[0].message and gh408[0].subject.gpu_index == 0
    assert "Failed to get NVLink state: Unknown Error" in gh408[0].evidence[0].lines


@pytest.mark.parametrize("reason", ["NVML: Unable to retrieve NVLink information as all links are inActive",
                                    "NVLink is not supported in MIG mode",
                                    "GPU 0 does not have or support NVLink"])
def test_the_nvlink_reasons_that_are_no_fault_raise_no_error_finding(reason):
    text = f"GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537486)\n{reason}\n"
    snapshot, _ = analyze_texts([("nvlink.txt", "$ nvidia-smi nvlink -s\n" + text)])
    assert not [f for f in run_checks(snapshot).findings if f.code == "GH408" and "could not read" in f.message]


def test_a_pasted_kernel_command_line_with_an_error_word_is_read_not_a_crash():
    """The cmdline parser raised IndexError without its one line: analyze asked about an error-looking line and failed
    with an internal error."""
    snapshot, _ = analyze_texts([("cmdline.txt", "$ cat /proc/cmdline\nBOOT_IMAGE=/boot/vmlinuz-5.15.0 root=/dev/sda1 "
                                                 "ro nvidia-drm.modeset=1 panic_on_error=1\n")])
    assert snapshot.host_env is not None and "nvidia-drm.modeset=1" in (snapshot.host_env.kernel_cmdline or "")
    with pytest.raises(ParseError):
        KINDS["kernel-cmdline"].parse("", "cmdline")
