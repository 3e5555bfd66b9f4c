"""GH203's fixes per decoded nvidia-smi/NVML error come from knowledge/fixes.csv (rows ``GH203:<signatures.csv id>``),
not from a dict in checks/driver.py (``TOOL_FIXES``, removed): the same fixes reach the same findings.

``RECORDED`` is what ``TOOL_FIXES`` held at bc2dcdb, dumped from the code before it moved: the table must give each
decoded error exactly these, in this order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import table_fixes
from gpuhealth.knowledge.signatures import signature
from gpuhealth.model import NvmlReport, Snapshot

CTK = ('sudo nvidia-ctk system create-dev-char-symlinks --create-all', 'any', False, 'then recreate the container',
       'command')
# decoded kind -> (command, family, disruptive, note, kind) per fix, as TOOL_FIXES gave them
RECORDED: dict[str, tuple[tuple[str, str, bool, str, str], ...]] = {
    'smi-cannot-communicate': (
        ('sudo modprobe nvidia', 'any', False, 'read the error it prints', 'command'),
    ),
    'nvml-driver-not-loaded': (
        ('sudo modprobe nvidia', 'any', False, 'read the error it prints', 'command'),
    ),
    'nvml-library-not-found': (
        ('ldconfig -p | grep libnvidia-ml', 'debian', False, '', 'command'),
        ('sudo apt-get install --reinstall libnvidia-compute-$(cut -d. -f1 /sys/module/nvidia/version)',
         'debian', False, '', 'command'),
        ('ldconfig -p | grep libnvidia-ml', 'rhel', False, '', 'command'),
    ),
    'nvml-gpu-is-lost': (
        ('sudo reboot', 'any', True, '', 'command'),
    ),
    'nvml-insufficient-permissions': (
        ('ls -l /dev/nvidia*', 'any', False, 'the user needs read/write on the device files', 'command'),
    ),
    'smi-no-devices': (
        ("sudo dmesg | grep -iE 'NVRM|RmInitAdapter|BAR'", 'any', False, '', 'command'),
    ),
    'nvml-gpu-not-found': (
        ("sudo dmesg | grep -iE 'NVRM|RmInitAdapter|BAR'", 'any', False, '', 'command'),
    ),
    'nvml-corrupted-inforom': (
        ('contact the vendor: the infoROM needs reflashing or the GPU service', 'any', False, '', 'step'),
    ),
    'nvml-insufficient-power': (
        ("connect the GPU's auxiliary power cables", 'any', True, '', 'step'),
    ),
    'nvml-reset-required': (
        ('sudo nvidia-smi --gpu-reset -i <index>', 'any', True, 'stop every process on that GPU first', 'step'),
    ),
    'nvml-unknown-error': (
        CTK,
    ),
    'nvml-operating-system': (
        CTK,
    ),
    'nvml-not-found': (
        ("sudo dmesg | grep -iE 'NVRM|RmInitAdapter|BAR'", 'any', False, '', 'command'),
    ),
    'nvml-unknown': (
        CTK,
    ),
}
DRIVER = Path(__file__).resolve().parent.parent / "src" / "gpuhealth" / "checks" / "driver.py"


def as_tuples(fixes) -> tuple[tuple[str, str, bool, str, str], ...]:
    return tuple((f.command, f.family, f.disruptive, f.note, f.kind) for f in fixes)


@pytest.mark.parametrize("kind", sorted(RECORDED))
def test_the_table_gives_each_decoded_error_the_fixes_the_code_gave(kind):
    assert as_tuples(table_fixes("GH203", kind=kind)) == RECORDED[kind]


@pytest.mark.parametrize("kind", sorted(RECORDED))
def test_a_failed_nvml_call_reaches_gh203_with_those_fixes(kind):
    # the catalogue row's own example message, as NVML's error: the live check decodes it and picks the fixes
    snapshot = Snapshot(nvml=NvmlReport(ok=False, error=signature(kind).example))
    findings = [f for f in run_checks(snapshot).findings if f.code == "GH203"]
    assert len(findings) == 1
    assert as_tuples(findings[0].fixes) == RECORDED[kind]


def test_an_error_without_rows_gets_no_fixes():
    assert table_fixes("GH203", kind="nvml-timeout") == ()
    assert table_fixes("GH203", kind="no-such-row") == ()


def test_the_fixes_are_no_longer_written_in_the_check():
    names = {node.targets[0].id for node in ast.parse(DRIVER.read_text()).body
             if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    assert "TOOL_FIXES" not in names and not names & {"_MODPROBE", "_LIBRARY", "_CGROUP"}
