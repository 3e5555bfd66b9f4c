"""Live check's decoding of nvidia-smi / NVML failures reads the signature catalogue (one place per fact)."""

from __future__ import annotations

import pytest

from gpuhealth.checks.registry import table_fixes
from gpuhealth.knowledge.causes import causes
from gpuhealth.knowledge.fixes import check_fixes
from gpuhealth.knowledge.signatures import signature, signatures
from gpuhealth.knowledge.tool_errors import NVML_RETURN_CODES, SMI_EXIT_CODES, decode


def test_every_number_names_a_catalogue_row():
    ids = {s.id for s in signatures()}
    assert set(NVML_RETURN_CODES.values()) <= ids
    assert set(SMI_EXIT_CODES.values()) <= ids
    # GH203's fixes per decoded error (knowledge/fixes.csv rows GH203:<row id>) name catalogue rows, the others a row
    # or a cause (GH205:<cause id>: the fixes of the cause a line names)
    keyed = {key.partition(':')[2] for key in check_fixes() if ':' in key}
    assert keyed and keyed <= ids | set(causes())
    assert {key.partition(':')[2] for key in check_fixes() if key.startswith("GH203:")} <= ids
    # every documented nvmlReturn_t except success (nvml.h: 1-29 and 999; 30 is newer than pynvml's list)
    assert set(NVML_RETURN_CODES) == {*range(1, 30), 999}


@pytest.mark.parametrize("code", sorted(NVML_RETURN_CODES))
def test_nvml_code_and_its_message_decode_to_the_same_row(code: int):
    row = signature(NVML_RETURN_CODES[code])
    assert decode(nvml_code=code).kind == row.id
    assert decode(row.example).signature.symptom == row.symptom


def test_message_wins_over_number():
    got = decode("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144",
                 exit_code=255)
    assert got.kind == "nvml-driver-library-mismatch" and got.signature.code == "GH202"
    assert got.meaning and not got.meaning.endswith(".")


def test_exit_code_alone():
    assert decode("", exit_code=9).kind == "nvml-driver-not-loaded"
    assert decode("some new text", exit_code=15).signature.cause == "gpu-fallen-off-bus"
    assert decode("some new text", exit_code=1) is None
    assert decode("") is None


def test_container_unknown_error_is_the_cgroup_problem():
    got = decode("Failed to initialize NVML: Unknown Error")
    assert got.signature.code == "GH803" and table_fixes("GH203", kind=got.kind)


def test_a_cause_line_later_in_the_text_wins():
    text = "modprobe: ERROR: could not insert 'nvidia': Operation not permitted\n" \
           "[ 1748.999277] Loading of module with unavailable key is rejected"
    assert decode(text).signature.cause == "secure-boot-refused"
