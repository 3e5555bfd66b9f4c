"""Which CUDA copies a program uses (GH602 from library files named in its output), a loader symbol error that
alone does not decide between a missing and a shadowed library (GH612), and TensorFlow skipping a GPU whose
compute capability its build lacks (GH606). Lines are real, from the public threads named beside them."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st
from tests.fuzzing import FUZZ

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.evidence.facts import cuda_library_lines
from gpuhealth.model import Severity

# pytorch/pytorch#111469 (torch 2.1 wheel, the wheel's libnvJitLink not found first)
NVJITLINK = ("ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/../../nvidia/cusparse/lib/"
             "libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12")
# infiniflow/ragflow#4466: ldd of the wheel's libcusparse resolves libnvJitLink from the system CUDA 12.1
LDD = ("$ ldd /srv/venv/lib/python3.12/site-packages/nvidia/cusparse/lib/libcusparse.so.12\n"
       "\tlinux-vdso.so.1 (0x00007ffebafed000)\n"
       "\tlibnvJitLink.so.12 => /usr/local/cuda-12.1/lib64/libnvJitLink.so.12 (0x000070ddad800000)\n"
       "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x000070ddad400000)\n")
# JuliaGPU/CUDAapi.jl#85: the library discovery picked libraries from two toolkits
DISCOVERY = ('const libcufft = "/usr/local/cuda-10.1/lib64/libcufft.so"\n'
             'const libcublas = "/usr/local/cuda-8.0/targets/x86_64-linux/lib/libcublas.so"\n'
             'const libcudnn = "/usr/local/cuda-8.0/cudnn/lib64/libcudnn.so"\n')
# tensorflow/tensorflow#6083 (Windows build, GeForce GTX 660M)
TF_IGNORING = ("I c:\\tf_jenkins\\home\\workspace\\release-win\\device\\gpu\\os\\windows\\tensorflow\\core\\"
               "common_runtime\\gpu\\gpu_device.cc:948] Ignoring visible gpu device (device: 0, name: GeForce GTX "
               "660M, pci bus id: 0000:01:00.0) with Cuda compute capability 3.0. The minimum required Cuda "
               "capability is 3.5.")


def lead(*texts: tuple[str, str]):
    snapshot, _ = analyze_texts(list(texts))
    report = run_checks(snapshot)
    return report.findings[0], report


def test_library_files_of_cuda_trees_and_wheels_only():
    found = cuda_library_lines([NVJITLINK, *LDD.splitlines()])["cuda"].library_files
    assert found == ("/usr/local/lib/python3.10/dist-packages/nvidia/cusparse/lib/libcusparse.so.12",
                     "/srv/venv/lib/python3.12/site-packages/nvidia/cusparse/lib/libcusparse.so.12",
                     "/usr/local/cuda-12.1/lib64/libnvJitLink.so.12")
    assert cuda_library_lines(["\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x0)"]) == {}
    assert cuda_library_lines(["no paths here"]) == {}


def test_two_toolkits_in_a_programs_library_files_is_gh602():
    finding, _ = lead(("ext.jl", DISCOVERY))
    assert finding.code == "GH602" and finding.severity is Severity.WARNING
    assert "8.0" in finding.message and "10.1" in finding.message


def test_one_toolkit_is_not_gh602():
    snapshot, _ = analyze_texts([("ext.jl", 'const libcufft = "/usr/local/cuda-10.1/lib64/libcufft.so"\n'
                                            'const libcublas = "/usr/local/cuda-10.1/lib64/libcublas.so"\n')])
    assert snapshot.cuda is not None and len(snapshot.cuda.library_files) == 2
    assert "GH602" not in {f.code for f in run_checks(snapshot).findings}


def test_nvjitlink_symbol_error_alone_leaves_the_cause_open():
    finding, _ = lead(("traceback.txt", NVJITLINK))
    assert finding.code == "GH612" and finding.severity is Severity.CRITICAL
    differential = {c.cause: c.status for c in finding.differential}
    assert differential.get("several-cuda-libraries") == "open"


def test_nvjitlink_error_with_the_system_copy_shown_is_gh602_critical():
    finding, report = lead(("session.txt", NVJITLINK + "\n" + LDD))
    assert finding.code == "GH602" and finding.severity is Severity.CRITICAL
    assert "GH612" in finding.explains and "pip CUDA wheels" in finding.message


def test_tensorflow_ignoring_an_old_gpu_is_gh606():
    finding, _ = lead(("session.txt", TF_IGNORING))
    assert finding.code == "GH606" and finding.severity is Severity.CRITICAL


def test_library_file_scan_is_fast_on_adversarial_lines():
    lines = ["/" + "a/" * 5000 + "lib" + "x" * 5000 + ".so" * 2000, "/lib" * 40000, ("/" + "b" * 79) * 2000]
    start = time.process_time()
    cuda_library_lines(lines)
    assert time.process_time() - start < 0.5


@FUZZ
@given(st.lists(st.text(max_size=300) | st.sampled_from([NVJITLINK, *LDD.splitlines(), *DISCOVERY.splitlines()]),
                max_size=20))
def test_library_file_scan_never_raises(lines):
    found = cuda_library_lines(lines)
    assert set(found) <= {"cuda"}
