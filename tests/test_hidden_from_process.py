"""GH608 against GH605/GH610: what a paste's own program text and session say about the GPUs a process sees.

Every example here is written by hand for these tests, from the documented semantics, not copied from a case:
- CUDA C++ Programming Guide, "CUDA Environment Variables": CUDA_VISIBLE_DEVICES lists the devices a process
  sees; the first index that is no device hides it and every entry after it;
- CUDA Runtime API, enum cudaError: cudaErrorNoDevice (100, "no CUDA-capable device is detected") and
  cudaErrorInvalidDevice (101, "invalid device ordinal");
- PyTorch torch/cuda/__init__.py: is_available() is True when a CUDA build counts a device; "No CUDA GPUs are
  available" is raised when it counts none (a CPU build stops at "Torch not compiled with CUDA enabled").
"""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.banners import read_banners
from gpuhealth.report.common import fold

SMI_ONE = "$ nvidia-smi -L\nGPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-5d1f7c2a-1111-2222-3333-444455556666)\n"
SMI_TWO = SMI_ONE + "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-7e2a8d3b-1111-2222-3333-444455556666)\n"
NO_GPUS = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
           "    x = torch.zeros(1).cuda()\nRuntimeError: No CUDA GPUs are available\n")
SMI_DOWN = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
            "that the latest NVIDIA driver is installed and running.\n")
TORCH_TRUE = '$ python -c "import torch; print(torch.cuda.is_available())"\nTrue\n'


def report_of(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    return run_checks(snapshot)


def lead(report):
    return fold(report.findings)[0].finding


def gh608(report):
    return [f for f in report.findings if f.code == "GH608"]


# --------------------------------------------------------------------------- the line a check script prints

@pytest.mark.parametrize(("line", "value"), [
    ("torch.cuda.is_available(): True", "True"),
    ("torch.cuda.is_available() = False", "False"),
    ("torch.cuda.is_available() -> True", "True"),
])
def test_a_printed_is_available_is_read_as_a_program_line(line, value):
    banners = read_banners(line)
    assert [(b.program, dict(b.values)) for b in banners] == [("torch.cuda.is_available()", {"value": value})]


@pytest.mark.parametrize("line", [
    "torch.cuda.is_available() returns True on the login node",  # a sentence: the words readers'
    "torch.cuda.is_available(): true",  # Python prints True, not true
    "torch.cuda.is_available(): True, but training fails",
])
def test_a_sentence_about_is_available_is_no_program_line(line):
    assert read_banners(line) == ()


# --------------------------------------------------------------------------- the driver works, one process sees none

def test_pytorch_seeing_a_gpu_in_another_run_leads_with_the_variable():
    session = TORCH_TRUE + "$ bash scripts/train.sh\n" + NO_GPUS
    report = report_of(("session.txt", session))
    top = lead(report)
    assert top.code == "GH608" and top.severity is Severity.WARNING
    assert "PyTorch saw a GPU elsewhere in the evidence" in top.message and "GH605" in top.explains
    assert top.fixes[0].command == "grep -n CUDA_VISIBLE_DEVICES scripts/train.sh"


def test_a_printed_is_available_in_notes_is_the_same_evidence():
    notes = "torch.cuda.is_available(): True\nbut the training script says\nRuntimeError: No CUDA GPUs are available\n"
    top = lead(report_of(("notes.txt", notes)))
    assert top.code == "GH608" and "GH605" in top.explains


def test_the_driver_listing_gpus_leads_with_the_variable_when_it_is_not_shown():
    top = lead(report_of(("session.txt", SMI_TWO + "$ python train.py\n" + NO_GPUS)))
    assert top.code == "GH608" and "the driver lists 2 GPU(s)" in top.message


def test_without_a_sign_that_the_driver_works_the_differential_stays_with_gh605():
    report = report_of(("session.txt", "$ python train.py\n" + NO_GPUS))
    assert lead(report).code == "GH605"
    assert not gh608(report)


def test_a_variable_shown_selecting_an_existing_gpu_is_not_blamed():
    # the last assignment wins: GPU 0 exists on this one-GPU host, so the variable is not what hides it
    session = (SMI_ONE + "$ export CUDA_VISIBLE_DEVICES=1\n$ export CUDA_VISIBLE_DEVICES=0\n$ python train.py\n"
               + NO_GPUS)
    report = report_of(("session.txt", session))
    assert not gh608(report)


def test_the_last_assignment_is_the_one_judged():
    session = (SMI_ONE + "$ export CUDA_VISIBLE_DEVICES=0\n$ export CUDA_VISIBLE_DEVICES=2\n$ python train.py\n"
               + NO_GPUS)
    top = lead(report_of(("session.txt", session)))
    assert top.code == "GH608" and "CUDA_VISIBLE_DEVICES=2" in top.message


def test_an_existing_uuid_is_no_finding():
    session = SMI_TWO + ("$ export CUDA_VISIBLE_DEVICES=GPU-7e2a8d3b-1111-2222-3333-444455556666\n"
                         "$ python train.py\nepoch 1 loss 0.25\n")
    assert not [f for f in gh608(report_of(("session.txt", session))) if f.severity is not Severity.INFO]


def test_a_launcher_path_that_is_not_plain_is_not_put_in_a_command():
    session = TORCH_TRUE + "$ bash 'my dir/run.sh'\n" + NO_GPUS
    top = lead(report_of(("session.txt", session)))
    assert top.code == "GH608"
    assert not any("my dir" in f.command for f in top.fixes)


# --------------------------------------------------------------------------- the driver down leads

def test_the_driver_down_leads_over_pytorch_having_seen_a_gpu():
    report = report_of(("session.txt", TORCH_TRUE + SMI_DOWN + "$ python train.py\n" + NO_GPUS))
    assert lead(report).code == "GH203"
    assert not gh608(report)


def test_the_driver_down_leads_over_a_list_that_may_hide_gpus():
    report = report_of(("session.txt", SMI_DOWN + "$ CUDA_VISIBLE_DEVICES=1 python train.py\n" + NO_GPUS))
    assert lead(report).code == "GH203"
    (finding,) = gh608(report)
    assert finding.severity is Severity.INFO and not finding.explains
    assert "CUDA_VISIBLE_DEVICES=1" in finding.message


# --------------------------------------------------------------------------- program text, the GPU count unknown

def test_an_invalid_ordinal_under_a_list_beginning_past_gpu_0_names_the_variable():
    script = ('import os\nimport torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n\n'
              'def main():\n    model = torch.nn.Linear(4, 4).to("cuda:0")\n\n'
              'if __name__ == "__main__":\n    main()\n')
    error = ("Traceback (most recent call last):\n  File \"train.py\", line 6, in main\n"
             "RuntimeError: CUDA error: invalid device ordinal\n")
    top = lead(report_of(("train.py", script), ("error.txt", error)))
    assert top.code == "GH608"
    assert "CUDA_VISIBLE_DEVICES=1 begins with GPU 1" in top.message and "invalid" in top.message


def test_a_sourced_script_shown_with_cat_sets_the_variable():
    session = ("$ cat env.sh\nexport CUDA_VISIBLE_DEVICES=3\n$ source env.sh\n$ python train.py\n" + NO_GPUS)
    top = lead(report_of(("session.txt", session)))
    assert top.code == "GH608" and "CUDA_VISIBLE_DEVICES=3" in top.message and "GH605" in top.explains


def test_a_cpu_only_build_is_its_own_cause_whatever_the_variable():
    session = ("$ export CUDA_VISIBLE_DEVICES=1\n$ python train.py\n"
               "AssertionError: Torch not compiled with CUDA enabled\n")
    assert lead(report_of(("session.txt", session))).code == "GH605"


# --------------------------------------------------------------------------- the value the failing command saw

def test_a_later_working_run_does_not_clear_the_prefix_the_failure_ran_under():
    session = (SMI_ONE + "$ CUDA_VISIBLE_DEVICES=1 python train.py\n" + NO_GPUS
               + "$ CUDA_VISIBLE_DEVICES=0 python train.py\nepoch 1 loss 0.25\n")
    top = lead(report_of(("session.txt", session)))
    assert top.code == "GH608" and "CUDA_VISIBLE_DEVICES=1" in top.message


def test_a_prefix_holds_for_its_own_command_only():
    # `VAR=2 cmd` set it for eval.py alone; train.py failed under the exported 0, which cannot hide every GPU
    session = ("$ export CUDA_VISIBLE_DEVICES=0\n$ CUDA_VISIBLE_DEVICES=2 python eval.py\nepoch 1 loss 0.25\n"
               "$ python train.py\n" + NO_GPUS)
    report = report_of(("session.txt", session))
    assert report.snapshot.env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert lead(report).code == "GH605" and not gh608(report)


def test_an_unset_before_the_failure_leaves_the_variable_unknown():
    session = ("$ export CUDA_VISIBLE_DEVICES=3\n$ echo $CUDA_VISIBLE_DEVICES\n3\n$ unset CUDA_VISIBLE_DEVICES\n"
               "$ python train.py\n" + NO_GPUS)
    assert "CUDA_VISIBLE_DEVICES" not in report_of(("session.txt", session)).snapshot.env


@pytest.mark.parametrize(("blocks", "expected"), [
    ([("export CUDA_VISIBLE_DEVICES=1", ""), ("python x.py", "")], {"CUDA_VISIBLE_DEVICES": "1"}),
    ([("CUDA_VISIBLE_DEVICES=1", ""), ("python x.py", "")], {"CUDA_VISIBLE_DEVICES": "1"}),
    ([("CUDA_VISIBLE_DEVICES=1 python a.py", ""), ("python x.py", "")], {}),
    ([("export CUDA_VISIBLE_DEVICES=1 && python x.py", "")], {"CUDA_VISIBLE_DEVICES": "1"}),
    ([("cat run.sh", "export CUDA_VISIBLE_DEVICES=4\npython x.py\n"), ("bash run.sh", "")],
     {"CUDA_VISIBLE_DEVICES": "4"}),
    ([("cat run.sh", "export CUDA_VISIBLE_DEVICES=4\n"), ("bash run.sh", ""), ("python x.py", "")], {}),
    ([("cat env.sh", "export CUDA_VISIBLE_DEVICES=4\n"), ("source env.sh", ""), ("python x.py", "")],
     {"CUDA_VISIBLE_DEVICES": "4"}),
    ([("export CUDA_VISIBLE_DEVICES=4", ""), ("unset CUDA_VISIBLE_DEVICES", ""), ("python x.py", "")],
     {"CUDA_VISIBLE_DEVICES": None}),
    ([("env", "PATH=/usr/bin\nCUDA_VISIBLE_DEVICES=5\n"), ("python x.py", "")], {"CUDA_VISIBLE_DEVICES": "5"}),
    ([("export CUDA_VISIBLE_DEVICES=0", ""), ("python x.py", '    os.environ["CUDA_VISIBLE_DEVICES"] = "6"\n')],
     {"CUDA_VISIBLE_DEVICES": "6"}),
    ([("export CUDA_VISIBLE_DEVICES=$GPU", ""), ("python x.py", "")], {}),
])
def test_the_shell_scoping_of_the_variable(blocks, expected):
    from gpuhealth.evidence.facts import visible_in_effect

    assert visible_in_effect(blocks, len(blocks) - 1) == expected


# --------------------------------------------------------------------------- PyTorch Lightning's refusal
# rendered from lightning/fabric/utilities/device_parser.py (_sanitize_gpu_ids):
# f"You requested gpu: {gpus}\n But your machine only has: {all_available_gpus}", with Python's list reprs

LIGHTNING = ("lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: {asked}\n"
             " But your machine only has: {has}\n")


def test_lightning_asked_for_more_gpu_ids_than_the_process_sees_is_gh608():
    session = SMI_ONE + "$ python train.py --devices 0,1\n" + LIGHTNING.format(asked="[0, 1]", has="[0]")
    report = report_of(("session.txt", session))
    top = lead(report)
    assert top.code == "GH608" and top.severity is Severity.WARNING
    assert "asks for GPU 1 (GPU ids [0, 1])" in top.message and "can see 1 GPU(s)" in top.message
    assert "map_location" not in top.message  # the checkpoint remedy is for torch.load's line only
    assert not any(f.code == "GH003" for f in report.findings)  # both lines are known


def test_lightning_seeing_no_gpu_at_all_is_the_pytorch_symptom():
    report = report_of(("log.txt", LIGHTNING.format(asked="[0]", has="[]")))
    assert lead(report).code == "GH605"
    assert all(f.severity is Severity.INFO for f in gh608(report))


def test_lightning_ids_kept_by_the_variable_are_judged_against_it():
    session = "$ CUDA_VISIBLE_DEVICES=2 python train.py\n" + LIGHTNING.format(asked="[0, 1, 2, 3]", has="[0]")
    top = lead(report_of(("session.txt", session)))
    assert top.code == "GH608" and "asks for GPU 3" in top.message


def test_the_failing_run_of_a_command_run_twice_is_the_one_judged():
    session = ("$ export CUDA_VISIBLE_DEVICES=0\n$ python train.py\nepoch 1 loss 0.25\n"
               "$ export CUDA_VISIBLE_DEVICES=2\n$ python train.py\n" + NO_GPUS)
    top = lead(report_of(("session.txt", session)))
    assert top.code == "GH608" and "CUDA_VISIBLE_DEVICES=2" in top.message
