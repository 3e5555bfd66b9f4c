"""The fixes of a finding made from pasted lines follow its leading cause and the framework the evidence shows;
GH203 never renders a missing NVML code as "None". Lines are real (sources beside them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.diagnosis import fits_evidence, led_by_evidence, split_commands
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.causes import symptoms
from gpuhealth.knowledge.signatures import signature
from gpuhealth.model import Candidate, Finding, Fix, MessageLine

CASES = Path(__file__).parent / "cases" / "dev"
FOUND_NO_DRIVER = ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                   "installed a driver from http://www.nvidia.com/Download/index.aspx")  # princeton-nlp/SimCSE#244
NO_DEVICE = "RuntimeError: CUDA error: no CUDA-capable device is detected"
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"  # facebookresearch/detectron2#460
JAXLIB = signature("jax-cuda-jaxlib-not-installed").example  # the row's real line
CONTAINER_CLI = ("$ nvidia-container-cli info\n"
                 "nvidia-container-cli: initialization error: nvml error: driver not loaded\n")  # NVIDIA/nvidia-docker


def finding(text: str, code: str) -> Finding:
    snapshot, _ = analyze_texts([("paste.txt", text if text.endswith("\n") else text + "\n")])
    return next(f for f in run_checks(snapshot).findings if f.code == code)


def commands(found: Finding) -> list[str]:
    return [f.command for f in found.fixes]


def test_gh605_fix_follows_the_leading_cause_not_the_checks_list():
    found = finding(FOUND_NO_DRIVER, "GH605")
    assert found.differential[0].cause == "driver-not-loaded"
    # in the order `gpuhealth fix` writes them: the read-only look first, with the condition
    assert commands(found)[0] == "dkms status" and "sudo modprobe nvidia" in commands(found)
    assert found.fixes[0].note.startswith("if the NVIDIA kernel module is not loaded")
    assert not any("nvidia_uvm" in c for c in commands(found))


def test_a_confirmed_cpu_only_torch_gets_the_cuda_wheel_not_modprobe():
    found = finding(NOT_COMPILED, "GH605")
    assert commands(found) == ["pip install --force-reinstall torch torchvision torchaudio --index-url https://download.pytorch.org/whl/cu<XY>"]


def test_a_checks_own_gh605_keeps_the_fixes_it_chose():
    # near miss: the check judged a collect_env (pytorch/pytorch#44303), so its own fix stands, cause and all
    text = (CASES / "cpu-only-pytorch-collect-env-44303" / "collect_env.txt").read_text()
    snapshot, _ = analyze_texts([("collect_env.txt", text)])
    found = next(f for f in run_checks(snapshot).findings if f.code == "GH605")
    assert "a CPU-only PyTorch build" in found.message
    assert any("download.pytorch.org/whl/cu<XY>" in c for c in commands(found))


def test_gh610_offers_no_framework_the_paste_does_not_show():
    found = finding(NO_DEVICE, "GH610")
    assert commands(found) and not any(w in c for c in commands(found) for w in ("jax", "tensorflow", "cupy"))


def test_gh610_offers_the_framework_the_paste_shows():
    found = finding(JAXLIB, "GH610")
    assert any("jax[cuda12]" in c for c in commands(found))
    assert not any("tensorflow" in c for c in commands(found))


def test_fits_evidence_keeps_fixes_for_the_framework_a_line_or_its_domain_names():
    jax = Fix("pip install --upgrade 'jax[cuda12]'")
    tensorflow = Fix("pip install --upgrade 'tensorflow[and-cuda]'")
    neutral = Fix("nvidia-smi")
    plain = MessageLine(line=NO_DEVICE, source="paste.txt", signature="cuda-no-device", symptom="framework-no-gpu")
    assert fits_evidence([jax, tensorflow, neutral], [plain]) == (neutral,)
    # a TensorFlow row's line: the domain names the framework even where the line does not
    tf = MessageLine(line="Could not load dynamic library 'libcudart.so.11.0'", source="paste.txt",
                     signature="tf-could-not-load-dynamic-library", symptom="cuda-library-missing")
    assert fits_evidence([jax, tensorflow, neutral], [tf]) == (tensorflow, neutral)


def test_gh203_names_no_nvml_code_it_was_not_given():
    snapshot, _ = analyze_texts([("session.txt", CONTAINER_CLI)])
    report = run_checks(snapshot)
    found = next(f for f in report.findings if f.code == "GH203")
    assert "None" not in found.message
    assert found.message.startswith("NVML failed: NVML found no loaded NVIDIA kernel module")
    # the cause the line names leads, at least as grave as the critical finding it explains
    lead = report.findings[0]
    assert lead.code == "GH201" and "GH203" in lead.explains and lead.severity.rank >= found.severity.rank
    # near miss: NVML's own return code is still shown when there is one (9 = NVML_ERROR_DRIVER_NOT_LOADED)
    coded = dataclasses.replace(snapshot, nvml=dataclasses.replace(snapshot.nvml, error_code=9))
    found = next(f for f in run_checks(coded).findings if f.code == "GH203")
    assert found.message.startswith("NVML (NVML error 9) failed")


def test_a_causes_own_fix_is_only_for_a_cause_that_shares_its_symptoms_check():
    from gpuhealth.knowledge.causes import causes, symptoms

    shared = {s.code for s in symptoms().values()}
    with_fix = [c for c in causes().values() if c.fix]
    assert with_fix and all(c.code in shared for c in with_fix)


def test_the_commands_that_decide_name_only_a_framework_the_lines_show():
    jax = finding(signature("jax-no-gpu-found").example, "GH610")  # a real JAX warning line
    assert jax.differential and not any("torch" in c.command for c in jax.differential)
    commands = {c.cause: c.command for c in jax.differential}
    assert commands["cuda-newer-than-driver"] == "nvidia-smi"
    assert commands["torch-arch-unsupported"] == ""  # its only command is PyTorch's: none is offered
    # a bare CUDA error names no framework: it may come from PyTorch, whose commands stay
    bare = finding(NO_DEVICE, "GH610")
    assert "import torch" in {c.cause: c.command for c in bare.differential}["cuda-newer-than-driver"]
    # near miss: a PyTorch line keeps PyTorch's commands (its row's domain names the framework)
    torch = finding(FOUND_NO_DRIVER, "GH605")
    assert "import torch" in {c.cause: c.command for c in torch.differential}["torch-cpu-build"]


# --------------------------------------------------------------------------- a lead by prior decides before it fixes

FIELD_LINES = Path(__file__).parent / "data" / "fieldlines"


def case_finding(name: str, code: str) -> Finding:
    folder = CASES / name
    texts = [(p.name, p.read_text(encoding="utf-8")) for p in sorted(folder.iterdir())
             if p.is_file() and p.suffix != ".toml" and p.name.lower() != "readme.md"]
    snapshot, _ = analyze_texts(texts)
    return next(f for f in run_checks(snapshot).findings if f.code == code)


def deciding_commands(found: Finding) -> set[str]:
    return {c for candidate in found.differential if candidate.status == "open"
            for c in split_commands(candidate.command)}


def test_a_cause_leading_by_prior_alone_gets_the_commands_that_decide_not_its_procedure():
    # "Failed to open /dev/nvidiactl: No such device" (hand-written fixture, README beside it): Secure Boot leads the
    # differential only as the usual first cause; before, the finding showed the whole MOK signing loop and a reboot
    text = (FIELD_LINES / "persistenced-nvidiactl-enodev.log").read_text(encoding="utf-8")
    found = finding(text, "GH201")
    assert found.differential[0].cause == "secure-boot-refused" and found.differential[0].status == "open"
    assert not led_by_evidence(symptoms()["module-refuses-to-load"], found.differential)
    assert commands(found)[:2] == ["mokutil --sb-state", "modinfo -F signer nvidia"]  # read-only: never a modprobe
    assert set(commands(found)) <= deciding_commands(found)
    assert not any(f.disruptive for f in found.fixes)
    assert not any("sign-file" in c or "mokutil --import" in c or "openssl" in c for c in commands(found))
    # the commands of the next cause too: they tell the likeliest causes apart
    assert "dkms status" in commands(found)
    assert found.fixes[0].note == "decides: Secure Boot refused the unsigned nvidia module"


def test_a_real_driver_container_log_without_the_secure_boot_state_is_not_given_the_signing_loop():
    # NVIDIA/gpu-operator (case folder): "Unable to load the kernel module 'nvidia.ko'" with no mokutil output
    found = case_finding("secure-boot-driver-container-unsigned-2404", "GH201")
    assert found.differential[0].status == "open"
    assert commands(found)[0] == "mokutil --sb-state"
    assert set(commands(found)) <= deciding_commands(found)
    assert not any(f.disruptive for f in found.fixes)


def test_a_cause_the_evidence_moved_to_the_front_keeps_its_fix():
    # "Found no NVIDIA driver" rules out the two causes the prior ranks above "module not loaded" (the same line as
    # test_gh605_fix_follows_the_leading_cause_not_the_checks_list): its check's fix, not the deciding commands
    found = finding(FOUND_NO_DRIVER, "GH605")
    assert led_by_evidence(symptoms()["torch-no-gpu"], found.differential)
    assert "sudo modprobe nvidia" in commands(found) and "lsmod | grep nvidia" not in commands(found)
    assert found.fixes[0].note.startswith("if the NVIDIA kernel module is not loaded")
    # a real driver-container log whose kernel line decides the cause (symbol versions differ: the module was built
    # for other kernel sources): the finding is that cause's, with its own fix, not "the driver could not be built
    # or installed" and a differential of why a build failed (nothing failed to build)
    found = case_finding("module-not-built-2204-image-on-2404-kernel", "GH507")
    assert "built against other kernel sources" in found.message and not found.differential
    assert commands(found)[0] == "dkms status" and "sudo dkms autoinstall -k $(uname -r)" in commands(found)


def test_led_by_evidence_reads_the_statuses_and_the_prior():
    symptom = symptoms()["module-refuses-to-load"]
    first, second, third = (Candidate(c.id, c.title, c.code, "open", "", c.decide) for c in symptom.causes[:3])
    assert not led_by_evidence(symptom, [first, second, third])
    ruled = dataclasses.replace(first, status="ruled out")
    assert led_by_evidence(symptom, [second, third, ruled])  # the likelier cause was ruled out
    # near miss: a less likely cause ruled out leaves the lead to its prior
    assert not led_by_evidence(symptom, [first, second, dataclasses.replace(third, status="ruled out")])
    # the only cause left open leads by elimination
    assert led_by_evidence(symptom, [third, ruled, dataclasses.replace(second, status="ruled out")])


def _text_report(path: Path) -> str:
    from click.testing import CliRunner

    from gpuhealth.cli import main
    result = CliRunner().invoke(main, ["analyze", str(path)], env={"COLUMNS": "200"})
    return result.output


def test_a_prior_led_finding_shows_its_deciding_commands_once(tmp_path):
    """A lead by prior alone shows the deciding commands as its fixes; the text report does not print them again
    as "to tell" beneath the differential. An evidence-led finding, whose fixes are its cause's procedure, keeps it."""
    prior_led = _text_report(CASES / "module-not-built-dkms-reinstall" / "session.txt")
    assert "# decides: the nvidia module was not built" in prior_led and "to tell:" not in prior_led
    pasted = tmp_path / "paste.txt"
    pasted.write_text(FOUND_NO_DRIVER + "\n", encoding="utf-8")
    evidence_led = _text_report(pasted)
    assert "to tell: lsmod | grep nvidia" in evidence_led


SMI_DOWN = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
            "that the latest NVIDIA driver is installed and running.\n")


def test_secure_boot_on_and_a_module_not_loaded_gets_the_deciding_steps_not_a_new_key():
    # Secure Boot enabled and nvidia not loaded does not show a refusal: the module may be missing for this kernel.
    # A new key, its enrolment and a reboot follow from a refusal, not from the guess.
    found = finding(SMI_DOWN + "$ mokutil --sb-state\nSecureBoot enabled\n", "GH506")
    assert "not confirmed" in found.message
    steps = commands(found)
    assert "sudo modprobe nvidia" in steps and "modinfo -F signer nvidia" in steps
    assert not [c for c in steps if "openssl" in c or "mokutil --import" in c or "sign-file" in c or "reboot" in c]


def test_a_shown_refusal_gets_the_whole_signing_procedure():
    refused = "$ sudo modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
    found = finding(SMI_DOWN + "$ mokutil --sb-state\nSecureBoot enabled\n" + refused, "GH506")
    assert "not confirmed" not in found.message
    steps = commands(found)
    assert any("openssl req" in c for c in steps) and "sudo mokutil --import MOK.der" in steps
    assert any("sign-file" in c for c in steps) and "sudo modprobe nvidia" not in steps  # its refusal is shown
