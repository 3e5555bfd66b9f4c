"""GH608: the value a visibility variable is set to, read only where the text shows it (CUDA C++ Programming Guide,
"CUDA Environment Variables": the list is read up to its first invalid entry; NVIDIA Container Toolkit, "GPU
Enumeration": NVIDIA_VISIBLE_DEVICES all / none / void). Every example here is written for this test; each reading
has a near miss that must stay quiet: a value a program computes is not a value shown."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence.facts import visible_devices_set
from gpuhealth.model import Report, Severity
from gpuhealth.report.common import fold


def _report(*pieces: tuple[str, str]) -> Report:
    snapshot, _ = analyze_texts(list(pieces))
    return run_checks(snapshot)


def _lead(report: Report) -> str:
    return fold(report.findings)[0].finding.code


def _gh608(report: Report) -> list:
    return [f for f in report.findings if f.code == "GH608"]


@pytest.mark.parametrize(("line", "found"), [
    # the ways programs and files set it, each with a literal value
    ('os.environ.setdefault("CUDA_VISIBLE_DEVICES", "3")', {"CUDA_VISIBLE_DEVICES": "3"}),
    ("os.putenv('CUDA_VISIBLE_DEVICES', '')", {"CUDA_VISIBLE_DEVICES": ""}),
    ('    "env": {"CUDA_VISIBLE_DEVICES": "2"},', {"CUDA_VISIBLE_DEVICES": "2"}),
    ("      NVIDIA_VISIBLE_DEVICES: none", {"NVIDIA_VISIBLE_DEVICES": "none"}),
    ("      - NVIDIA_VISIBLE_DEVICES=void", {"NVIDIA_VISIBLE_DEVICES": "void"}),
    ("ENV NVIDIA_VISIBLE_DEVICES all", {"NVIDIA_VISIBLE_DEVICES": "all"}),
    ("%env CUDA_VISIBLE_DEVICES=1", {"CUDA_VISIBLE_DEVICES": "1"}),
    ("os.environ['CUDA_VISIBLE_DEVICES'] = '0,1'  # two GPUs", {"CUDA_VISIBLE_DEVICES": "0,1"}),
    ("I put `os.environ['CUDA_VISIBLE_DEVICES']='2'` at the top", {"CUDA_VISIBLE_DEVICES": "2"}),
    ("I ran CUDA_VISIBLE_DEVICES=1, then it failed", {"CUDA_VISIBLE_DEVICES": "1"}),  # the sentence's comma
    # a value the program computes, or a slot a page leaves for it: not shown, so not read
    ("os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu", {}),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = str(opt.device)', {}),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = f"{rank}"', {}),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = "{}".format(rank)', {}),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = "%d" % rank', {}),
    ('os.environ["CUDA_VISIBLE_DEVICES"] = "0" if single else "0,1"', {}),
    ("CUDA_VISIBLE_DEVICES=<gpu id> python main.py", {}),
    ("CUDA_VISIBLE_DEVICES={gpus} python main.py", {}),
    ("set CUDA_VISIBLE_DEVICES=%GPU%", {}),
    # prose that begins with the name is no `NAME: value` line
    ("CUDA_VISIBLE_DEVICES: I tried both 0 and 1", {}),
    ("CUDA_VISIBLE_DEVICES is set to 1 in my job script", {}),
])
def test_a_value_is_read_only_where_the_text_shows_it(line, found):
    assert visible_devices_set(line) == found


def test_a_computed_value_is_never_judged_as_a_word():
    script = ("import argparse, os\nimport torch\n"
              "os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu\nmodel = Net().cuda()\n")
    report = _report(("train.py", script))
    assert not _gh608(report)


def test_a_trailing_comma_hides_nothing():
    session = ("$ nvidia-smi -L\n"
               "GPU 0: NVIDIA RTX A5000 (UUID: GPU-5a6b7c8d-0000-1111-2222-333344445555)\n"
               "GPU 1: NVIDIA RTX A5000 (UUID: GPU-9e8d7c6b-0000-1111-2222-333344445555)\n"
               "$ export CUDA_VISIBLE_DEVICES=0,1,\n$ python train.py\nepoch 1 loss 0.52\n")
    assert not [f for f in _gh608(_report(("session.txt", session))) if f.severity >= Severity.WARNING]


def test_a_dockerfile_env_above_the_run_of_its_image_is_what_the_container_ran_under():
    pasted = ("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
              "ENV NVIDIA_VISIBLE_DEVICES=none\n"
              "RUN pip install torch\n"
              'CMD ["python3", "serve.py"]\n\n'
              "$ docker build -t serve . && docker run --rm serve\n"
              "RuntimeError: No CUDA GPUs are available\n")
    report = _report(("pasted.txt", pasted))
    assert _lead(report) == "GH608"
    assert "NVIDIA_VISIBLE_DEVICES=none" in _gh608(report)[0].message


def test_a_compose_file_that_gives_the_container_no_gpu_leads_with_gh608():
    compose = ("services:\n  worker:\n    image: pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime\n"
               "    runtime: nvidia\n    environment:\n      NVIDIA_VISIBLE_DEVICES: void\n\n"
               "worker-1  | RuntimeError: No CUDA GPUs are available\n")
    report = _report(("compose.txt", compose))
    assert _lead(report) == "GH608"
    assert all(f.severity <= Severity.WARNING for f in _gh608(report))


# --------------------------------------------------------------------------- set after CUDA started

_LATE = ("import os\nimport torch\n\n"
         "print('GPUs usable:', torch.cuda.is_available())\n"
         'os.environ["CUDA_VISIBLE_DEVICES"] = "3"\n'
         "net = Net().cuda()\n")
_OOM = ("Traceback (most recent call last):\n  File \"fit.py\", line 6, in <module>\n    net = Net().cuda()\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 10.75 GiB total "
        "capacity; 10.52 GiB already allocated; 9.50 MiB free; 10.60 GiB reserved in total by PyTorch)\n")


def test_an_assignment_after_cuda_started_is_not_the_value_the_program_ran_under():
    snapshot, _ = analyze_texts([("fit.py", _LATE)])
    assert "CUDA_VISIBLE_DEVICES" not in snapshot.env
    (late,) = snapshot.visible_set_late
    assert (late.value, late.after) == ("3", "print('GPUs usable:', torch.cuda.is_available())")


def test_an_assignment_after_cuda_started_leads_where_the_program_then_ran_out_of_memory():
    report = _report(("fit.py", _LATE), ("traceback.txt", _OOM))
    assert _lead(report) == "GH608"
    (gh608,) = _gh608(report)
    assert gh608.severity is Severity.WARNING
    assert "does not change the GPUs the program sees" in gh608.message


def test_an_assignment_after_cuda_started_without_a_failure_is_information():
    # a launcher may set the variable for the processes it starts next: nothing failed, nothing to warn of
    assert all(f.severity is Severity.INFO for f in _gh608(_report(("fit.py", _LATE))))


@pytest.mark.parametrize("program", [
    # set first, then CUDA starts: the usual, working order
    "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\nimport torch\nnet = Net().cuda()\n",
    # the line that starts CUDA is in a function called after the assignment: it runs later
    "import os\nimport torch\n\ndef main():\n    net = Net().cuda()\n\nif __name__ == '__main__':\n"
    "    os.environ['CUDA_VISIBLE_DEVICES'] = '1'\n    main()\n",
    # device_count() may count through NVML without starting CUDA (PyTorch 2)
    "import os\nimport torch\nn = torch.cuda.device_count()\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
    "net = Net().cuda()\n",
])
def test_an_assignment_before_cuda_starts_is_not_late(program):
    snapshot, _ = analyze_texts([("fit.py", program)])
    assert snapshot.visible_set_late == ()
    assert snapshot.env.get("CUDA_VISIBLE_DEVICES") == "1"


# --------------------------------------------------------------------------- launchers that set the variable

_JOB = ("#!/bin/bash\n#SBATCH --job-name=fit\n#SBATCH --partition=gpu\n#SBATCH --gres=gpu:1\n#SBATCH --time=04:00:00\n"
        "module load cuda\npython fit.py --device cuda:1\n")
_ORDINAL = ("Traceback (most recent call last):\n  File \"fit.py\", line 31, in <module>\n"
            "    net = net.to(args.device)\nRuntimeError: CUDA error: invalid device ordinal\n")


@pytest.mark.parametrize(("line", "count"), [
    ("#SBATCH --gres=gpu:2", 2), ("#SBATCH --gres=gpu:v100:1", 1), ("#SBATCH --gpus=4", 4),
    ("srun --gpus-per-node=a100:2 python fit.py", 2), ("sbatch --gres gpu:1 job.sh", 1), ("#SBATCH -G 3", 3),
    ("#SBATCH --gres=gpu:1,mps:50", 1),
    # per task, or no scheduler at all: not a count for the job
    ("#SBATCH --gpus-per-task=1", None), ("python fit.py --gpus 2", None), ("# we asked for --gres=gpu:2", None),
])
def test_the_gpus_a_slurm_job_asks_for_are_what_its_processes_see(line, count):
    from gpuhealth.evidence.facts import device_request_lines

    allocated = device_request_lines([line]).get("gpus_allocated")
    assert (allocated.count if allocated else None) == count


def test_an_index_beyond_the_gpus_a_slurm_job_was_given_leads_with_gh608_naming_the_request():
    report = _report(("job.sh", _JOB), ("slurm-1234.out", _ORDINAL))
    assert _lead(report) == "GH608"
    (gh608,) = _gh608(report)
    assert "GPU 1" in gh608.message and "#SBATCH --gres=gpu:1" in gh608.message
    assert any("#SBATCH --gres=gpu:1" in line for e in gh608.evidence for line in e.lines)


def test_a_slurm_job_using_the_gpus_it_was_given_raises_nothing():
    job = _JOB.replace("--gres=gpu:1", "--gres=gpu:2")
    assert not [f for f in _gh608(_report(("job.sh", job))) if f.severity >= Severity.WARNING]


@pytest.mark.parametrize(("command", "value"), [
    ("deepspeed --include localhost:2,3 fit.py --deepspeed ds.json", "2,3"),
    ("deepspeed --num_gpus=2 fit.py", "0,1"),
    ("deepspeed --include 'node1:0,1@node2:0,1' fit.py", None),  # several hosts: no one list for this one
    ("deepspeed fit.py --deepspeed ds.json", None),
])
def test_deepspeeds_launcher_sets_the_variable_it_is_given(command, value):
    assert visible_devices_set(command).get("CUDA_VISIBLE_DEVICES") == value


def test_a_deepspeed_include_list_with_an_invalid_ordinal_leads_with_gh608():
    session = ("$ deepspeed --include localhost:1 fit.py --deepspeed ds.json\n"
               "[INFO] [launch.py:145:main] WORLD INFO DICT: {'localhost': [1]}\n" + _ORDINAL)
    report = _report(("session.txt", session))
    assert _lead(report) == "GH608"
    assert "CUDA_VISIBLE_DEVICES=1" in _gh608(report)[0].message


@pytest.mark.parametrize(("line", "highest"), [
    ("gpu_ids: [0, 1]", 1), ('  "device_ids": [0, 1, 2],', 2), ("trainer = pl.Trainer(devices=[1])", 1),
    # a count, not ids; a word that only ends in "devices"
    ("trainer = pl.Trainer(devices=2)", None), ("num_devices: [4]", None),
])
def test_gpu_id_lists_in_configurations_are_read(line, highest):
    from gpuhealth.evidence.facts import device_requests

    found = device_requests([line])
    assert (max(r.index for r in found) if found else None) == highest


def test_a_configuration_listing_more_gpus_than_the_host_has_leads_with_gh608():
    session = ("$ nvidia-smi -L\nGPU 0: NVIDIA GeForce RTX 3060 (UUID: GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9)\n"
               "$ cat configs/fit.yaml\nmodel: resnet50\ngpu_ids: [0, 1]\nbatch_size: 64\n"
               "$ python fit.py -c configs/fit.yaml\n" + _ORDINAL)
    report = _report(("session.txt", session))
    assert _lead(report) == "GH608"
    assert "GPU 1" in _gh608(report)[0].message


# --------------------------------------------------------------------------- an option's default GPU

_ARGS = ("import argparse, os\nimport torch\n\nparser = argparse.ArgumentParser()\n"
         "parser.add_argument('--gpu', type=int, default=1, help='which GPU')\nargs = parser.parse_args()\n"
         "torch.cuda.set_device(args.gpu)\n")
_ONE_GPU = "$ nvidia-smi -L\nGPU 0: NVIDIA GeForce RTX 4070 (UUID: GPU-1c2d3e4f-5a6b-7c8d-9e0f-a1b2c3d4e5f6)\n"


@pytest.mark.parametrize(("line", "found"), [
    ("parser.add_argument('--gpu', type=int, default=1, help='gpu id')", (1, "the default of --gpu (1)")),
    ("parser.add_argument('-g', '--gpu_ids', type=str, default='0,1')", (1, "the default of --gpu_ids (0,1)")),
    ("parser.add_argument('--gpus', type=int, default=2)", None),  # a count
    ("parser.add_argument('--device', default='cpu')", None),
    ("parser.add_argument('--gpu', action='store_true', default=False)", None),
])
def test_an_options_default_gpu_is_read(line, found):
    from gpuhealth.evidence.facts import device_requests

    defaults = [(r.index, r.text) for r in device_requests([line]) if r.default]
    assert (defaults[0] if defaults else None) == found


def test_an_options_default_beyond_the_gpus_leads_where_the_ordinal_was_refused():
    report = _report(("train.py", _ARGS), ("session.txt", _ONE_GPU), ("traceback.txt", _ORDINAL))
    assert _lead(report) == "GH608"
    assert "the default of --gpu" in _gh608(report)[0].message


def test_an_options_default_is_not_judged_without_a_failure():
    # the command line may pass --gpu 0: a default alone is no fault
    report = _report(("train.py", _ARGS), ("session.txt", _ONE_GPU))
    assert not [f for f in _gh608(report) if f.severity >= Severity.WARNING]


def test_tensorflow_finding_no_gpu_under_a_list_that_begins_above_zero_names_the_list():
    session = ("$ CUDA_VISIBLE_DEVICES=2 python fit.py\n"
               "tensorflow.python.framework.errors_impl.InvalidArgumentError: Cannot assign a device for operation "
               "fc/MatMul: Could not satisfy explicit device specification '/device:GPU:0' because no devices "
               "matching that specification are registered in this process; available devices: "
               "/job:localhost/replica:0/task:0/device:CPU:0\n")
    report = _report(("session.txt", session))
    assert _lead(report) == "GH608"
    assert "CUDA_VISIBLE_DEVICES=2 begins with GPU 2" in _gh608(report)[0].message


# --------------------------------------------------------------------------- Ray tasks that ask for no GPU

_RAY = ("import ray\nimport torch\n\nray.init()\n\n@ray.remote{args}\ndef score(batch):\n"
        "    net = Scorer().cuda()\n    return net(batch)\n\nprint(ray.get(score.remote(rows)))\n")
_NO_GPU = ("Traceback (most recent call last):\n  File \"score.py\", line 11, in <module>\n"
           "ray.exceptions.RayTaskError(RuntimeError): ray::score() (pid=811, ip=10.1.2.3)\n"
           "  File \"/usr/lib/python3/dist-packages/torch/cuda/__init__.py\", line 298, in _lazy_init\n"
           "    torch._C._cuda_init()\nRuntimeError: No CUDA GPUs are available\n")


@pytest.mark.parametrize("args", ["", "()", "(num_cpus=2)", "(num_gpus=0)"])
def test_a_ray_task_that_asks_for_no_gpu_and_sees_none_leads_with_gh608(args):
    report = _report(("score.py", _RAY.format(args=args)), ("traceback.txt", _NO_GPU))
    assert _lead(report) == "GH608"
    assert "Ray" in _gh608(report)[0].message


@pytest.mark.parametrize("program", [
    _RAY.format(args="(num_gpus=1)"),
    _RAY.format(args="(num_gpus=0.5)"),
    _RAY.format(args="") + "score.options(num_gpus=1).remote(rows)\n",  # given a GPU where it is called
])
def test_a_ray_task_given_a_gpu_is_not_the_cause(program):
    report = _report(("score.py", program), ("traceback.txt", _NO_GPU))
    assert not any("Ray" in f.message for f in _gh608(report))


def test_a_ray_task_without_a_gpu_and_without_a_failure_raises_nothing():
    # a CPU task is how Ray is often used
    assert not [f for f in _gh608(_report(("score.py", _RAY.format(args="")))) if f.severity >= Severity.WARNING]


def test_a_cuda_build_seeing_no_gpu_under_a_list_that_begins_above_zero_names_the_list():
    session = ('$ python3 -c "import torch; print(torch.__version__)"\n2.4.0+cu121\n'
               "$ export CUDA_VISIBLE_DEVICES=1\n"
               '$ python3 -c "import torch; print(torch.cuda.is_available())"\nFalse\n')
    report = _report(("session.txt", session))
    assert _lead(report) == "GH608"
    assert "CUDA_VISIBLE_DEVICES=1 begins with GPU 1" in _gh608(report)[0].message
    # the same answer from a build whose CUDA is not shown may be a CPU-only wheel: the variable does not lead
    unknown = session.split("$ export", 1)[1]
    assert _lead(_report(("session.txt", "$ export" + unknown))) != "GH608"


@pytest.mark.parametrize(("printed", "cuda"), [("2.4.0+cu121", "12.1"), ("2.4.0+cpu", None), ("2.4.0", None)])
def test_a_printed_torch_version_says_its_build(printed, cuda):
    command = '$ python3 -c "import torch; print(torch.__version__)"'
    snapshot, _ = analyze_texts([("session.txt", f"{command}\n{printed}\n")])
    assert snapshot.torch.torch_version == printed
    assert snapshot.torch.torch_cuda_version == cuda


@pytest.mark.parametrize(("command", "value"), [
    ("accelerate launch --gpu_ids 1 --num_processes 1 fit.py", "1"),
    ("accelerate launch --multi_gpu --gpu_ids=2,3 fit.py", "2,3"),
    ("accelerate launch --gpu_ids all fit.py", None),  # leaves the variable alone
])
def test_accelerates_launcher_sets_the_variable_it_is_given(command, value):
    from gpuhealth.evidence.facts import device_requests

    assert visible_devices_set(command).get("CUDA_VISIBLE_DEVICES") == value
    assert not device_requests([command])  # the launcher's list is what the program sees, not an index it asks for


def test_an_accelerate_list_that_hides_every_gpu_leads_with_gh608():
    session = ("$ accelerate launch --gpu_ids 1 --num_processes 1 fit.py\n"
               "Traceback (most recent call last):\n  File \"fit.py\", line 9, in <module>\n"
               "RuntimeError: No CUDA GPUs are available\n")
    report = _report(("session.txt", session))
    assert _lead(report) == "GH608"
    assert "CUDA_VISIBLE_DEVICES=1" in _gh608(report)[0].message


def test_a_kubernetes_env_entry_that_gives_the_container_no_gpu_is_read():
    manifest = ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: fit\n    image: fit:latest\n"
                "    env:\n    - name: NVIDIA_VISIBLE_DEVICES\n      value: \"none\"\n    - name: LOG_LEVEL\n"
                "      value: debug\n")
    snapshot, _ = analyze_texts([("pod.yaml", manifest + "\nfit  RuntimeError: No CUDA GPUs are available\n")])
    assert snapshot.env == {"NVIDIA_VISIBLE_DEVICES": "none"}
