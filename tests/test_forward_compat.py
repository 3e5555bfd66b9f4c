"""CUDA forward compatibility (a cuda-compat libcuda ahead of the driver's own): which cause leads.

The rules are NVIDIA's CUDA Compatibility guide, "Forward Compatibility"
<https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html>: cuda-compat-X-Y puts the libcuda of
CUDA X.Y's driver under /usr/local/cuda-X.Y/compat; it is for a CUDA newer than the installed driver, only on
data-center GPUs (and select NGC-ready RTX parts); errors 803 (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) and 804
(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) are what a wrong deployment raises. Every paste below is written here from
those rules (hand-made, no case of tests/cases): nvidia-smi headers in the format nvidia-smi prints, the two errors in
the CUDA runtime's wording.
"""

from __future__ import annotations

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.cuda import forward_compat_gpu, is_compat_dir
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence.facts import facts_for, library_path_set
from gpuhealth.model import Severity
from gpuhealth.report.common import fold

ERROR_803 = "RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination"
ERROR_804 = "RuntimeError: CUDA error: forward compatibility was attempted on non supported HW"


def smi(driver: str, cuda: str, gpu: str) -> str:
    return f"""$ nvidia-smi
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver}             Driver Version: {driver}     CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  {gpu:<31}Off |   00000000:01:00.0 Off |                  Off |
|  0%   35C    P8             20W /  350W |       1MiB /  24564MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
"""


def report(*texts: str):
    snapshot, _ = analyze_texts([(f"paste{i}.txt", t) for i, t in enumerate(texts)])
    return run_checks(snapshot)


def lead(result):
    return fold(result.findings)[0].finding


def commands(finding) -> list[str]:
    return [f.command for f in finding.fixes]


def test_a_compat_libcuda_no_newer_than_the_driver_leads_with_its_exact_path():
    # driver 580 supports CUDA 13.0; cuda-compat-12-9 (driver 575) on LD_LIBRARY_PATH is older: the guide says not to
    session = (smi("580.65.06", "13.0", "NVIDIA GeForce RTX 3090")
               + "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.9/compat:/usr/local/cuda-12.9/lib64\n"
               + f"$ python train.py\n{ERROR_803}\n")
    top = lead(report(session))
    assert top.code == "GH603" and top.severity is Severity.CRITICAL
    assert "/usr/local/cuda-12.9/compat" in top.message and "580.65.06" in top.message
    assert "GH901" in top.explains  # the 803 is its symptom
    removal = [c for c in commands(top) if c.startswith("export LD_LIBRARY_PATH=")]
    assert removal and "grep -vxF /usr/local/cuda-12.9/compat" in removal[0]
    assert not any(f.disruptive for f in top.fixes)  # no driver change for a path to clean


def test_the_compat_directory_is_read_from_an_export_line_and_from_ldd():
    exported = (smi("580.65.06", "13.0", "NVIDIA GeForce RTX 4090")
                + "$ export LD_LIBRARY_PATH=/usr/local/cuda-12.9/compat:$LD_LIBRARY_PATH\n"
                + f"$ ./llama-cli -m model.gguf\n{ERROR_803}\n")
    assert lead(report(exported)).code == "GH603"
    ldd = (smi("580.65.06", "13.0", "NVIDIA GeForce RTX 4090")
           + "$ ldd ./app | grep libcuda\n\tlibcuda.so.1 => /usr/local/cuda-12.9/compat/libcuda.so.1 (0x00007f)\n"
           + f"$ ./app\n{ERROR_803}\n")
    top = lead(report(ldd))
    assert top.code == "GH603" and "/usr/local/cuda-12.9/compat/libcuda.so.1" in top.message


def test_a_cuda_newer_than_the_driver_on_a_geforce_is_the_driver_to_upgrade():
    # the image brings CUDA 12.9 (and its compat libcuda); driver 570 supports 12.8; a GeForce cannot use forward
    # compatibility, so 804 is the symptom and the driver the fix
    dockerfile = "FROM nvidia/cuda:12.9.0-runtime-ubuntu22.04\nRUN pip install torch\nCMD [\"python\", \"train.py\"]\n"
    result = report(smi("570.133.07", "12.8", "NVIDIA GeForce RTX 4090"),
                    f"$ docker run --rm --gpus all myimage\n{ERROR_804}\n", dockerfile)
    top = lead(result)
    assert top.code == "GH601" and top.severity is Severity.CRITICAL
    assert "not supported on NVIDIA GeForce RTX 4090" in top.message and "GH603" in top.explains
    assert commands(top)[0] == "sudo apt-get install cuda-drivers-575"


def test_the_image_a_container_runs_is_the_programs_cuda():
    run = "docker run --rm --gpus all nvidia/cuda:12.9.0-base-ubuntu22.04 ./deviceQuery"
    facts = dict(facts_for(run, ""))
    assert facts["container-image"].overlays["cuda"].base_image_cuda == "12.9.0"
    top = lead(report(smi("570.133.07", "12.8", "NVIDIA GeForce RTX 3080"), f"$ {run}\n{ERROR_804}\n"))
    assert top.code == "GH601" and any(run in line for e in top.evidence for line in e.lines)


def test_a_data_center_gpu_with_a_newer_compat_that_fails_gets_the_guides_pairing_rule():
    session = (smi("535.183.01", "12.2", "NVIDIA A100-SXM4-80GB")
               + "$ ldconfig -p | grep libcuda\n"
               + "\tlibcuda.so.1 (libc6,x86-64) => /usr/local/cuda-12.8/compat/libcuda.so.1\n"
               + "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n"
               + f"$ python -c 'import torch; torch.zeros(1).cuda()'\n{ERROR_803}\n")
    top = lead(report(session))
    assert top.code == "GH603" and top.severity is Severity.CRITICAL
    assert "driver branch" in top.message and "data-center" in top.message
    steps = [f for f in top.fixes if f.kind == "step"]
    assert any("cuda-compat package" in f.command and "cuda-compat-12-8" in f.note for f in steps)
    assert not any("grep -vxF" in c for c in commands(top))  # forward compatibility is the intent there: no removal


def test_a_newer_compat_on_a_data_center_gpu_without_an_error_is_the_intended_use():
    session = (smi("535.183.01", "12.2", "NVIDIA H100 80GB HBM3")
               + "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.8/compat:/usr/local/cuda-12.8/lib64\n")
    assert not [f for f in report(session).findings if f.code == "GH603"]


def test_a_newer_compat_on_a_geforce_is_not_supported():
    # within CUDA 12 the program runs on driver 570 by minor version compatibility: removing the compat comes first
    session = (smi("570.133.07", "12.8", "NVIDIA GeForce RTX 4090")
               + "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.9/compat\n" + f"$ ./app\n{ERROR_804}\n")
    top = lead(report(session))
    assert top.code == "GH603" and top.severity is Severity.CRITICAL and "not supported on" in top.message
    assert "minor version compatibility" in top.message
    fixes = commands(top)
    removal = next(i for i, c in enumerate(fixes) if c.startswith("export LD_LIBRARY_PATH="))
    assert removal < fixes.index("sudo apt-get install cuda-drivers-575")
    # a CUDA 13 compat on that driver is another family: the driver upgrade comes first
    session = (smi("570.133.07", "12.8", "NVIDIA GeForce RTX 4090")
               + "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-13.0/compat\n" + f"$ ./app\n{ERROR_804}\n")
    top = lead(report(session))
    fixes = commands(top)
    assert "upgrade the driver to 580.65.06 or newer" in top.message
    assert fixes.index("sudo apt-get install cuda-drivers-580") < next(
        i for i, c in enumerate(fixes) if c.startswith("export LD_LIBRARY_PATH="))


def test_a_newer_nvidia_cuda_image_on_a_geforce_is_critical_before_it_fails():
    # the container toolkit enables the image's compat libcuda because it is newer than the driver: 804 will follow
    run = "docker run --rm --gpus all nvidia/cuda:12.9.0-base-ubuntu22.04 python3 app.py"
    gh601 = next(f for f in report(smi("570.133.07", "12.8", "NVIDIA GeForce RTX 3060"), f"$ {run}\n").findings
                 if f.code == "GH601")
    assert gh601.severity is Severity.CRITICAL
    # the same image on a data-center GPU runs through forward compatibility: minor-version information only
    gh601 = next(f for f in report(smi("570.133.07", "12.8", "NVIDIA L40S"), f"$ {run}\n").findings
                 if f.code == "GH601")
    assert gh601.severity is Severity.INFO


def test_where_the_gpu_is_not_named_the_commands_that_decide_are_given_not_a_guess():
    # the module's version alone (no nvidia-smi, no GPU name): forward compatibility may or may not apply here
    session = ("$ cat /proc/driver/nvidia/version\n"
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.07  Fri Mar 14 21:40:38 UTC 2025\n"
               "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.9/compat\n" + f"$ ./app\n{ERROR_803}\n")
    result = report(session)
    gh603 = next(f for f in result.findings if f.code == "GH603")
    assert "if these GPUs support forward compatibility" in gh603.message
    assert {"nvidia-smi", "ldconfig -p | grep libcuda"} <= set(commands(gh603))
    assert not any(f.disruptive for f in gh603.fixes)
    assert not any(f.code == "GH601" and f.severity is Severity.CRITICAL for f in result.findings)


def test_library_path_assignments():
    assert library_path_set("export LD_LIBRARY_PATH=/usr/local/cuda-12.9/compat:$LD_LIBRARY_PATH") == (
        "/usr/local/cuda-12.9/compat",)
    assert library_path_set("LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/compat") == (
        "/usr/local/nvidia/lib64", "/usr/local/cuda/compat")
    assert library_path_set("ENV LD_LIBRARY_PATH /usr/local/cuda/compat/lib.real:${LD_LIBRARY_PATH}") == (
        "/usr/local/cuda/compat/lib.real",)
    assert library_path_set('os.environ["LD_LIBRARY_PATH"] = "/opt/cuda-compat"') == ("/opt/cuda-compat",)
    assert library_path_set("I then set LD_LIBRARY_PATH=/usr/local/cuda-12.9/compat and it failed") == ()
    assert library_path_set("export LD_LIBRARY_PATH=$HOME/lib") == ()


def test_compat_directories_and_gpu_classes():
    assert is_compat_dir("/usr/local/cuda-12.9/compat") and is_compat_dir("/usr/local/cuda/compat/lib.real")
    assert is_compat_dir("/opt/conda/cuda-compat/libcuda.so.1")
    assert not is_compat_dir("/usr/lib/x86_64-linux-gnu/compat") and not is_compat_dir("/usr/local/cuda-12.9/lib64")
    snapshot, _ = analyze_texts([("a.txt", smi("570.133.07", "12.8", "NVIDIA RTX A6000"))])
    assert forward_compat_gpu(snapshot) is None  # select NGC-ready RTX parts may: the name does not decide
    snapshot, _ = analyze_texts([("a.txt", smi("570.133.07", "12.8", "Tesla V100-SXM2-32GB"))])
    assert forward_compat_gpu(snapshot) == "datacenter"


def test_nvidia_smi_reporting_another_cuda_than_its_driver_shows_the_libcuda_it_loaded():
    # NVML reads "CUDA Version" from the libcuda it loads (nvmlSystemGetCudaDriverVersion, cuDriverGetVersion): a
    # 580 driver's own is 13.0, so 12.9 there is an older libcuda (compat or stale) on the loader path
    top = lead(report(smi("580.65.06", "12.9", "NVIDIA GeForce RTX 4090"), f"$ ./app\n{ERROR_803}\n"))
    assert top.code == "GH603" and top.severity is Severity.CRITICAL and "libcuda of CUDA 12.9" in top.message
    assert any("kernel driver 580.65.06 (CUDA 13.0)" in line for e in top.evidence for line in e.lines)
    # 12.9 on a 570 driver is a forward-compat libcuda, which a GeForce cannot use
    top = lead(report(smi("570.133.07", "12.9", "NVIDIA GeForce RTX 4090"), f"$ ./app\n{ERROR_804}\n"))
    assert top.code == "GH603" and "not supported on" in top.message


def test_a_driver_reporting_its_own_cuda_is_not_read_as_a_compat_libcuda():
    for driver, cuda in (("580.95.05", "13.0"), ("575.57.08", "12.9"), ("535.183.01", "12.2"),
                         ("565.57.01", "12.7")):  # 12.7 is not in the table: it decides nothing
        result = report(smi(driver, cuda, "NVIDIA GeForce RTX 4090"))
        assert not [f for f in result.findings if f.code == "GH603"], driver


def test_the_gpu_class_comes_from_lspci_when_nvidia_smi_is_not_given():
    session = ("$ lspci -nn | grep -i nvidia\n"
               "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] "
               "(rev a1)\n"
               "$ cat /proc/driver/nvidia/version\n"
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.07  Fri Mar 14 21:40:38 UTC 2025\n"
               "$ echo $LD_LIBRARY_PATH\n/usr/local/cuda-12.9/compat\n" + f"$ ./app\n{ERROR_804}\n")
    snapshot, _ = analyze_texts([("a.txt", session)])
    assert forward_compat_gpu(snapshot) == "consumer"
    top = lead(run_checks(snapshot))
    assert top.code == "GH603" and "not supported on" in top.message and "GeForce RTX 3090" in top.message


# NVIDIA's NGC containers check the host's driver at start (/opt/nvidia/entrypoint.d, the GPU driver version check):
# these lines follow its echo statements, with versions of our own choosing
NGC_REFUSED = ("ERROR: This container was built for NVIDIA Driver Release 560.35 or later, but\n"
               "       version 535.183.01 was detected and compatibility mode is UNAVAILABLE.\n\n"
               "       [[Forward compatibility was attempted on non supported HW "
               "(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) cuInit()=804]]\n")
NGC_MINOR = """WARNING: CUDA Minor Version Compatibility mode ENABLED.
  Using driver version 550.54.15 which has support for CUDA 12.4.  This container
  was built with CUDA 12.6 and will be run in Minor Version Compatibility mode.
"""
NGC_FORWARD = """NOTE: CUDA Forward Compatibility mode ENABLED.
  Using CUDA 12.6 driver version 560.35.03 with kernel driver version 535.183.01.
  See https://docs.nvidia.com/deploy/cuda-compatibility/ for details.
"""


def test_error_804_alone_is_a_driver_too_old_for_the_programs_cuda():
    # forward compatibility is reached for when the driver is older than the program's CUDA (an NVIDIA image's
    # entrypoint, the toolkit's compat hook); nothing here shows a compat directory set by hand on the host
    top = lead(report(f"$ python train.py\n{ERROR_804}\n"))
    assert top.code == "GH601" and top.severity is Severity.CRITICAL and "804" in top.message
    assert "nvidia-smi" in commands(top)
    assert any("Upgrade the host's driver" in f.command and f.disruptive for f in top.fixes)
    assert not [f for f in report(f"$ python train.py\n{ERROR_804}\n").findings if f.code == "GH603"]


def test_an_ngc_container_refusing_the_host_driver_is_the_driver_to_upgrade():
    result = report(NGC_REFUSED)
    top = lead(result)
    assert top.code == "GH601" and top.severity is Severity.CRITICAL and "NGC" in top.message
    assert not [f for f in result.findings if f.code in ("GH003", "GH603")]  # the 804 status is this finding's
    # the two versions it names: driver 560.35 is CUDA 12.6's (Update 1 bundles 560.35.03), the host has 535.183.01
    assert "CUDA 12.6" in top.message and "535.183.01" in top.message
    assert "sudo apt-get install cuda-drivers-560" in commands(top)
    assert any("NGC container" in f.command for f in top.fixes if f.kind == "step")
    # the first line alone (the second cut off): the catalogue's finding, with its fixes in words
    alone = lead(report(NGC_REFUSED.splitlines()[0] + "\n"))
    assert alone.code == "GH601" and any("release the message names" in f.command for f in alone.fixes)


def test_an_ngc_container_in_a_compatibility_mode_that_works_is_not_a_fault():
    for text in (NGC_MINOR, smi("535.183.01", "12.2", "NVIDIA A100-SXM4-80GB") + NGC_FORWARD):
        result = report(text)
        assert not [f for f in result.findings if f.severity is Severity.CRITICAL], text
        assert not [f for f in result.findings if f.code in ("GH003", "GH004")], text
    minor = [f for f in report(NGC_MINOR).findings if f.code == "GH601"]
    assert minor and minor[0].severity is Severity.INFO


def test_error_804_beside_a_compat_directory_set_on_the_host_is_that_directory_to_remove():
    # the GPU is not named, but the 804 says a GPU CUDA sees does not support forward compatibility
    session = ("$ export LD_LIBRARY_PATH=/usr/local/cuda-12.8/compat:$LD_LIBRARY_PATH\n"
               f"$ python train.py\n{ERROR_804}\n")
    top = lead(report(session))
    assert top.code == "GH603" and top.severity is Severity.CRITICAL and "GH601" in top.explains
    assert any(c.startswith("export LD_LIBRARY_PATH=") and "/usr/local/cuda-12.8/compat" in c for c in commands(top))
    assert not any(f.disruptive for f in top.fixes)  # a path to clean, no driver change
    # the same directory in ldconfig -p, with a GeForce named: still the host's compat to remove
    session = (smi("550.54.15", "12.4", "NVIDIA GeForce RTX 4080")
               + "$ ldconfig -p | grep libcuda.so.1\n"
               + "\tlibcuda.so.1 (libc6,x86-64) => /usr/local/cuda-12.8/compat/libcuda.so.1\n"
               + "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n"
               + f"$ ./app\n{ERROR_804}\n")
    top = lead(report(session))
    assert top.code == "GH603" and top.severity is Severity.CRITICAL and "GH601" in top.explains


def test_an_nvidia_image_newer_than_the_host_driver_on_a_geforce_leads_with_the_driver_even_with_804():
    run = "docker run --rm --gpus all nvidia/cuda:12.8.1-runtime-ubuntu24.04 ./app"
    top = lead(report(smi("550.54.15", "12.4", "NVIDIA GeForce RTX 4070"), f"$ {run}\n{ERROR_804}\n"))
    assert top.code == "GH601" and top.severity is Severity.CRITICAL and "GH603" in top.explains


def test_the_ngc_check_names_the_containers_cuda_and_the_host_driver():
    from gpuhealth.knowledge.cuda_drivers import cuda_of_driver
    from gpuhealth.parsers.ngc import ngc_driver_lines

    assert cuda_of_driver("560.35") == "12.6" and cuda_of_driver("550.54") == "12.4"
    assert cuda_of_driver("555.99") == "12.5"  # no release bundles it: the newest whose GA driver it reaches
    assert cuda_of_driver("300.1") is None and cuda_of_driver("") is None
    fields = ngc_driver_lines(NGC_REFUSED.splitlines())
    assert fields["smi"].driver_version == "535.183.01" and fields["cuda"].base_image_cuda == "12.6"
    assert ngc_driver_lines(NGC_REFUSED.splitlines()[:1]) == {}  # the host's driver cut off: nothing to compare
    assert ngc_driver_lines(NGC_MINOR.splitlines()) == {}
