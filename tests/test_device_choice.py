"""Device choice against the GPUs that exist (GH608, issue 21): an error that says the device asked for does not exist
here, read together with the program text or command line in the same evidence that chooses the device, and the GPU
count where the evidence gives one.

Every example here is hand-written from the sources that print the messages (no case text): PyTorch's
torch/cuda/__init__.py (get_device_properties: AssertionError("Invalid device id"); "No CUDA GPUs are available"),
torch/nn/parallel/data_parallel.py (device_ids checked with get_device_properties), the CUDA Runtime API's
cudaErrorInvalidDevice ("invalid device ordinal"), XLA's xla/service/backend.cc ("Invalid device ordinal value (%d).
Valid range is [0, %d]."), TensorFlow's gpu_device.cc ("'visible_device_list' listed an invalid GPU id '%d' but visible
device count is %d") and colocation_graph.cc ("Could not satisfy explicit device specification '...' because no devices
matching that specification are registered in this process; available devices: ..."), and the CUDA C++ Programming
Guide's CUDA_VISIBLE_DEVICES (the GPUs it keeps are renumbered from 0).
"""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence import load
from gpuhealth.evidence.facts import device_requests
from gpuhealth.model import Report, Severity

load()

ONE_GPU = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
TWO_GPUS = ONE_GPU + "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-66666666-7777-8888-9999-000000000000)\n"
TF_ERROR = "tensorflow.python.framework.errors_impl.InvalidArgumentError: "
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


def _report(*pieces: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(pieces)
    return run_checks(snapshot)


def _lead(report: Report):
    from gpuhealth.report.common import fold

    return fold(report.findings)[0].finding


def _gh608(report: Report) -> list:
    return [f for f in report.findings if f.code == "GH608"]


def _asked(line: str) -> list[tuple[int, str, int | None]]:
    return [(r.index, r.text, r.visible) for r in device_requests([line])]


def test_gpu_id_lists_are_read_as_their_highest_id():
    assert _asked("model = nn.DataParallel(model, device_ids=[0, 1, 2])") == [(2, "device_ids=[0, 1, 2]", None)]
    assert _asked("trainer = pl.Trainer(gpus=[0,1])") == [(1, "gpus=[0,1]", None)]
    assert _asked("python train.py --gpu_ids 0,3 --batch 8") == [(3, "--gpu_ids 0,3", None)]
    assert _asked("python main.py --gpus 0,1") == [(1, "--gpus 0,1", None)]
    # a count is no index: `--gpus 2`, `gpus=2`, Lightning's devices=2
    assert _asked("python main.py --gpus 2") == [] and _asked("trainer = pl.Trainer(gpus=2)") == []
    assert _asked("use `cuda:1` here") == [(1, "cuda:1", None)]  # program text quoted in markdown
    assert _asked('dev = torch.device("cuda", 1)') == [(1, 'device("cuda", 1)', None)]
    assert _asked("with torch.cuda.device(2):") == [(2, "cuda.device(2)", None)]


def test_tensorflow_refusals_say_the_index_and_how_many_gpus_the_process_has():
    assert _asked(TF_ERROR + "Invalid device ordinal value (2). Valid range is [0, 1].") == [
        (2, "XLA device ordinal 2", 2)]
    assert _asked(TF_ERROR + "'visible_device_list' listed an invalid GPU id '1' but visible device count is 1") == [
        (1, "visible_device_list entry 1", 1)]
    explicit = (TF_ERROR + "Cannot assign a device for operation MatMul: Could not satisfy explicit device "
                "specification '/device:GPU:1' because no devices matching that specification are registered in "
                f"this process; available devices: {CPU0}, {GPU0}")
    assert _asked(explicit) == [(1, "device:GPU:1", 1)]
    # the placer's other refusal is about a kernel, not a device that is missing: only the index is read
    kernel = (TF_ERROR + "Cannot assign a device for operation Assign: Could not satisfy explicit device specification "
              "'/device:GPU:0' because no supported kernel for GPU devices is available.")
    assert _asked(kernel) == [(0, "device:GPU:0", None)]


def test_a_tensorflow_ordinal_beyond_its_range_leads_with_gh608():
    log = (f"{TF_ERROR}Invalid device ordinal value (1). Valid range is [0, 0].\n"
           "\twhile setting up XLA_GPU_JIT device number 1\n")
    lead = _lead(_report(("train.log", log)))
    assert lead.code == "GH608" and lead.severity == Severity.WARNING
    assert "asks for GPU 1" in lead.message and "the only valid index is 0 (a single GPU is device 0)" in lead.message


def test_an_explicit_tensorflow_device_the_process_lacks_leads_with_gh608():
    log = (f"{TF_ERROR}Cannot assign a device for operation MatMul: Could not satisfy explicit device specification "
           "'/device:GPU:2' because no devices matching that specification are registered in this process; available "
           f"devices: {CPU0}, {GPU0}, /job:localhost/replica:0/task:0/device:GPU:1\n")
    lead = _lead(_report(("train.log", log)))
    assert lead.code == "GH608" and "asks for GPU 2" in lead.message and "valid indices are 0-1" in lead.message


def test_dataparallel_device_ids_beyond_the_gpus_listed_lead_with_gh608():
    traceback = ("Traceback (most recent call last):\n"
                 '  File "train.py", line 30, in <module>\n'
                 "    model = nn.DataParallel(model, device_ids=[0, 1])\n"
                 '  File "/usr/lib/python3/dist-packages/torch/cuda/__init__.py", line 337, in get_device_properties\n'
                 '    raise AssertionError("Invalid device id")\n'
                 "AssertionError: Invalid device id\n")
    lead = _lead(_report(("nvidia-smi -L", ONE_GPU), ("traceback.txt", traceback)))
    assert lead.code == "GH608" and "asks for GPU 1 (device_ids=[0, 1])" in lead.message
    assert "can see 1 GPU(s)" in lead.message and lead.severity == Severity.WARNING
    # the negative: an index within the count (two GPUs listed) is no finding about the index
    assert not _gh608(_report(("nvidia-smi -L", TWO_GPUS), ("traceback.txt", traceback)))


SCRIPT = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "{value}"\nimport torch\nmodel = Net().to("cuda")\n'
NO_GPUS = ("Traceback (most recent call last):\n"
           '  File "train.py", line 4, in <module>\n'
           '    model = Net().to("cuda")\n'
           "RuntimeError: No CUDA GPUs are available\n")


def _session(value: str, run: str = "python train.py") -> str:
    return f"$ cat train.py\n{SCRIPT.format(value=value)}$ {run}\n{NO_GPUS}"


def test_a_shown_python_script_sets_the_variable_for_the_command_that_runs_it():
    lead = _lead(_report(("session.txt", _session("1"))))
    assert lead.code == "GH608" and lead.severity == Severity.WARNING
    assert "CUDA_VISIBLE_DEVICES=1 begins with GPU 1" in lead.message
    for run in ("python3 train.py --epochs 3", "python -u ./train.py"):
        assert _lead(_report(("session.txt", _session("1", run)))).code == "GH608", run


def test_a_valid_value_or_another_script_does_not_make_the_variable_the_cause():
    # the variable set to a valid value: index 0 exists whenever a GPU does, so it is not what hides them
    report = _report(("session.txt", _session("0")))
    assert _lead(report).code != "GH608"
    assert all(f.severity <= Severity.INFO for f in _gh608(report))
    # the program that failed is not the script shown: its os.environ did not apply to that run
    assert _lead(_report(("session.txt", _session("1", "python eval.py")))).code != "GH608"


def test_an_ordinal_error_with_a_gpu_fallen_off_the_bus_leads_with_the_bus_failure():
    log = ("[  100.123456] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
           "$ python train.py --device cuda:1\n"
           "RuntimeError: CUDA error: invalid device ordinal\n")
    report = _report(("evidence.txt", log))
    assert _lead(report).code == "GH302" and "GH608" in _lead(report).explains
    assert all(f.severity <= Severity.WARNING for f in _gh608(report))
    # nvidia-smi -L then lists the GPUs left: its count is not the host's, so it decides no cause of the index
    listed = _report(("evidence.txt", log.replace("$ python", f"$ nvidia-smi -L\n{ONE_GPU}$ python")))
    assert _lead(listed).code == "GH302"
    assert all(not _decided(f) for f in _gh608(listed))


def test_a_device_choice_is_never_critical():
    pieces = [
        (("nvidia-smi -L", ONE_GPU), ("log", "python x.py --device cuda:3\nRuntimeError: CUDA error: invalid device "
                                             "ordinal\n")),
        (("session.txt", _session("2")),),
        (("log", f"{TF_ERROR}'visible_device_list' listed an invalid GPU id '4' but visible device count is 2\n"),),
    ]
    for evidence in pieces:
        found = _gh608(_report(*evidence))
        assert found and all(f.severity <= Severity.WARNING for f in found), evidence


# --------------------------------------------------------------------------- the GPU count in the reporter's words

def _count(text: str) -> list[str]:
    from gpuhealth.parsers.prose import gpu_count_statements

    return [s.value for s in gpu_count_statements(text)]


def test_the_gpu_count_a_person_states_is_read():
    assert _count("I have only one GPU (RTX 3090) in my machine.") == ["1"]
    assert _count("My server has 2 GPUs.") == ["2"]
    assert _count("We have two NVIDIA GeForce RTX 3090 GPUs.") == ["2"]
    assert _count("The machine has 8x A100 GPUs.") == ["8"]
    assert _count("I am on a single-GPU machine.") == ["1"]
    assert _count("On systems with 1 GPU the script trains on the CPU.") == ["1"]
    # no count of this host: another subject, a condition, a requirement, the past, a question, two numbers
    for text in ("I have two questions about the GPU.", "If you have only one GPU, set it to 0.",
                 "This code needs 2 GPUs.", "I used to have two GPUs.", "I trained with 2 GPUs.",
                 "Do I have only one GPU?", "I have one GPU at home. My server has 4 GPUs."):
        assert _count(text) == [], text


def test_an_index_beyond_the_count_the_reporter_states_is_gh608_on_their_words():
    words = "My training script has\n\nexport CUDA_VISIBLE_DEVICES=2\n\nand my PC has only one GPU.\n"
    [gh608] = _gh608(_report(("notes.txt", words)))
    assert gh608.severity == Severity.WARNING and "index 2 is not a GPU on this host" in gh608.message
    assert gh608.labels.get("reported") == "words"
    assert any("my PC has only one GPU" in line for e in gh608.evidence for line in e.lines)
    # the negative: the count stated keeps the index (two GPUs, index 1)
    assert not _gh608(_report(("notes.txt", words.replace("=2", "=1").replace("only one GPU", "two GPUs"))))


def test_a_program_listing_the_gpus_wins_over_the_count_in_words():
    words = ("I have only one GPU.\n$ python train.py --device cuda:1\n"
             "RuntimeError: CUDA error: invalid device ordinal\n")
    report = _report(("notes.txt", words))
    assert _lead(report).code == "GH608" and "can see 1 GPU(s)" in _lead(report).message
    # nvidia-smi -L lists two GPUs: GPU 1 exists, whatever the words say
    listed = _report(("nvidia-smi -L", TWO_GPUS), ("notes.txt", words))
    assert not any("can see 1 GPU(s)" in f.message for f in _gh608(listed))


# --------------------------------------------------------------------------- the count not in the evidence

def test_an_ordinal_error_without_the_count_says_so_with_the_commands_that_decide_it():
    log = "$ python train.py --device cuda:1\nRuntimeError: CUDA error: invalid device ordinal\n"
    report = _report(("log", log))
    [gh608] = _gh608(report)
    assert "can see" not in gh608.message and all(c.status == "open" for c in gh608.differential)
    assert any(s.code == "GH608" and "how many GPUs it sees (paste nvidia-smi -L)" in s.reason for s in report.skipped)
    assert "nvidia-smi -L" in [f.command for f in gh608.fixes]
    deciding = [c.command for c in gh608.differential if c.cause == "device-index-beyond-count"]
    assert deciding and "python -c 'import torch; print(torch.cuda.device_count())'" in deciding[0]


# --------------------------------------------------------------------------- a stronger cause leads

def test_a_driver_nvidia_smi_cannot_reach_leads_over_the_ordinal():
    log = ("$ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
           "the latest NVIDIA driver is installed and running.\n"
           "$ python train.py --device cuda:1\nRuntimeError: CUDA error: invalid device ordinal\n")
    report = _report(("session.txt", log))
    assert _lead(report).code == "GH203"
    assert all(f.severity <= Severity.WARNING for f in _gh608(report))


def test_a_cpu_only_wheel_leads_over_the_variable_the_script_sets():
    session = _session("1").replace("RuntimeError: No CUDA GPUs are available",
                                    "AssertionError: Torch not compiled with CUDA enabled")
    assert _lead(_report(("session.txt", session))).code == "GH605"


def test_tensorflow_seeing_no_device_under_a_nonzero_first_index_leads_with_the_variable():
    session = ("$ export CUDA_VISIBLE_DEVICES=1\n$ python train.py\n"
               "2023-05-01 10:00:00.123456: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:268] failed "
               "call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n")
    lead = _lead(_report(("session.txt", session)))
    assert lead.code == "GH608" and "a single-GPU host has only GPU 0" in lead.message
    # set to 0, the variable hides nothing whenever a GPU exists: not the cause
    assert _lead(_report(("session.txt", session.replace("=1", "=0")))).code != "GH608"


def test_a_lone_script_choosing_a_gpu_is_no_healthy_host():
    # the program's text says how the job is set up, not that any GPU works: NO DIAGNOSIS, never HEALTHY
    script = 'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\nimport torch\nmodel = Net().to("cuda")\n'
    report = _report(("train.py", script))
    assert report.verdict == "NO DIAGNOSIS" and [f.code for f in report.findings] == ["GH005"]
    # with the error it raised, the same script is a diagnosis
    assert _lead(_report(("train.py", script), ("traceback.txt", NO_GPUS))).code == "GH608"


def _decided(finding) -> list[str]:
    return [c.cause for c in finding.differential if c.status == "confirmed"]


def test_the_driver_list_decides_which_cause_keeps_the_index_from_the_program():
    error = "RuntimeError: CUDA error: invalid device ordinal\n"
    # beyond the host's GPUs: the index, whatever CUDA_VISIBLE_DEVICES does
    beyond = _lead(_report(("nvidia-smi -L", ONE_GPU), ("session.txt", f"$ python train.py --device cuda:1\n{error}")))
    assert beyond.code == "GH608" and _decided(beyond) == ["device-index-beyond-count"]
    # a GPU the host has, renumbered away by CUDA_VISIBLE_DEVICES: the variable
    session = f"$ CUDA_VISIBLE_DEVICES=1 python train.py --device cuda:1\n{error}"
    renumbered = _lead(_report(("nvidia-smi -L", TWO_GPUS), ("session.txt", session)))
    assert renumbered.code == "GH608" and _decided(renumbered) == ["cuda-visible-devices-hides"]
    # a count only the framework's refusal gives decides neither
    log = f"{TF_ERROR}Invalid device ordinal value (1). Valid range is [0, 0].\n"
    assert _decided(_lead(_report(("train.log", log)))) == []


# --------------------------------------------------------------------------- a launcher's ranks

RANK_FAILS = ("[rank1]: Traceback (most recent call last):\n"
              '[rank1]:   File "train.py", line 10, in <module>\n'
              "[rank1]:     torch.cuda.set_device(local_rank)\n"
              "[rank1]: RuntimeError: CUDA error: invalid device ordinal\n")


def test_more_ranks_per_node_than_gpus_is_decided_where_a_rank_finds_no_device():
    assert _asked("torchrun --nproc_per_node=4 train.py") == [
        (3, "--nproc_per_node=4: ranks 0-3, each on GPU LOCAL_RANK", None)]
    assert _asked("python -m torch.distributed.launch --nproc-per-node 2 train.py")[0][0] == 1
    assert _asked("torchrun --nproc_per_node=gpu train.py") == []  # the launcher counts the GPUs itself
    session = f"$ torchrun --nproc_per_node=2 train.py\n{RANK_FAILS}"
    lead = _lead(_report(("nvidia-smi -L", ONE_GPU), ("session.txt", session)))
    assert lead.code == "GH608" and "start at most 1 process(es) per node" in lead.message
    assert _decided(lead) == ["more-ranks-than-gpus"]
    # as many ranks as GPUs: no finding about the ranks
    assert not _gh608(_report(("nvidia-smi -L", TWO_GPUS), ("session.txt", session)))
    # without a failing rank the script may not use LOCAL_RANK: not judged
    assert not _gh608(_report(("nvidia-smi -L", ONE_GPU), ("session.txt", "$ torchrun --nproc_per_node=2 train.py\n")))
