"""Frameworks' own "your driver is too old for this CUDA" messages (GH601), whole and wrapped over two lines.

The lines are our own, rendered from each program's format string with made-up versions (the format strings are cited
in the catalogue rows' source titles: JuliaGPU/CUDA.jl v2.3.0 deps/compatibility.jl, v3.13.1/v5.8.0
src/initialization.jl, v6.3.0 CUDACore/src/initialization.jl; openxla/xla nvptx_compiler.cc; the CUDA runtime's
cudaErrorInsufficientDriver text as CuPy, TensorFlow and ggml print it). Julia's logger prints a message of several
lines with "│ " before each later line; CUDA.jl's own format string breaks "is not supported by / your driver".
None is copied from a case."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.signatures import match_line
from gpuhealth.model import Report, Severity
from gpuhealth.parsers.wrapped import unwrap_lines


def report(text: str) -> Report:
    snapshot, _ = analyze_texts([("paste.txt", text)])
    return run_checks(snapshot)


def lead(text: str) -> tuple[str, Severity | None]:
    result = report(text)
    if not result.findings:
        return "HEALTHY", None
    return result.findings[0].code, result.findings[0].severity


JULIA_OLD = ("┌ Warning: CUDA 11.0.0 is not supported by\n"
             "│ your driver (which supports up to 10.2)\n"
             "└ @ CUDA ~/.julia/packages/CUDA/qPBFT/deps/compatibility.jl:196\n")


@pytest.mark.parametrize(("line", "row"), [
    ("┌ Warning: CUDA 11.0.0 is not supported by your driver (which supports up to 10.2)",
     "julia-cuda-not-supported-by-driver"),
    ("┌ Warning: You are using CUDA toolkit 11.1.0 with a driver that only supports up to 10.2.",
     "julia-cuda-driver-only-supports-up-to"),
    ("┌ Warning: You are using CUDA 12.2.0 with a driver that only supports up to 11.x.",
     "julia-cuda-driver-only-supports-up-to"),
    ("┌ Error: This version of CUDA.jl requires an NVIDIA driver for CUDA 12.x or higher (yours only supports up to "
     "CUDA 11.4.0)", "julia-cuda-driver-too-old"),
    ("┌ Error: This version of CUDA.jl only supports NVIDIA drivers for CUDA 11.x or 12.x (yours is for CUDA 10.2.0)",
     "julia-cuda-driver-too-old"),
    ("┌ Warning: This version of CUDA.jl only supports NVIDIA drivers for CUDA 10.2 or higher (yours is for CUDA "
     "10.1.0)",
     "julia-cuda-driver-too-old"),
    ("┌ Warning: The NVIDIA driver on this system only supports up to CUDA 11.2.0.", "julia-driver-supports-old-cuda"),
    ("2025-01-07 10:11:12.131415: W external/xla/xla/service/gpu/nvptx_compiler.cc:765] The NVIDIA driver's CUDA "
     "version is 12.2 which is older than the ptxas CUDA version (12.6.20). Because the driver is older than the ptxas "
     "version, XLA is disabling parallel compilation, which may slow down compilation.", "xla-driver-older-than-ptxas"),
    ("[11/05/2024-16:18:50] [W] [TRT] CUDA initialization failure with error: 35. Please check your CUDA "
     "installation:  http://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html",
     "tensorrt-cuda-init-insufficient-driver"),
    ("[E] [TRT] Cuda initialization failure with error 35. Please check cuda installation:  http://docs.nvidia.com/cuda/",
     "tensorrt-cuda-init-insufficient-driver"),  # TensorRT 5-7's wording
    ("cudaGetDeviceCount returned 35", "cuda-samples-device-count-insufficient-driver"),
    ("numba.cuda.cudadrv.driver.CudaDriverError: Driver missing function: cuCtxCreate_v3",
     "numba-driver-missing-function"),
])
def test_each_message_is_its_row(line, row):
    sig = match_line(line)
    assert sig is not None and sig.id == row
    assert sig.code == "GH601" and sig.cause == "cuda-newer-than-driver"


@pytest.mark.parametrize("line", [
    # CUDA.jl 5.x refusing a driver too NEW for it (CUDA 13): not a driver too old
    "┌ Error: This version of CUDA.jl only supports NVIDIA drivers for CUDA 11.x or 12.x (yours is for CUDA 13.0.0)",
    "CUDA toolchain: - runtime 12.6, artifact installation - driver 560.35.3 for 12.6",  # CUDA.versioninfo()'s banner
    "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
    "CUDA 12.4 is supported by your driver (which supports up to 12.4)",
    "[E] [TRT] CUDA initialization failure with error 100. Please check your CUDA installation",  # no device, not 35
    "cudaGetDeviceCount returned 350",
    "Driver missing function: ",  # no function named
])
def test_a_driver_new_enough_or_a_banner_is_no_row(line):
    sig = match_line(line)
    assert sig is None or sig.code != "GH601"


def test_julias_two_line_warning_leads_with_gh601():
    assert unwrap_lines(JULIA_OLD).splitlines()[0] == (
        "┌ Warning: CUDA 11.0.0 is not supported by your driver (which supports up to 10.2)")
    assert lead(JULIA_OLD)[0] == "GH601"


@pytest.mark.parametrize("text", [
    # a terminal of 60 columns breaks inside a word; the rest starts the next line
    "RuntimeError: CUDA error: CUDA driver version is insuffi\ncient for CUDA runtime version\n",
    # ggml's line, broken by a mail client between words
    "ggml_cuda_init: failed to initialize CUDA: CUDA driver\nversion is insufficient for CUDA runtime version\n",
    # TensorFlow's stream executor line, wrapped at 72 columns
    "2025-01-07 10:11:12.131415: E tensorflow/stream_executor/cuda/cuda_driver.cc:271] CUDA driver version is\n"
    "insufficient for CUDA runtime version\n",
    "┌ Error: This version of CUDA.jl requires an NVIDIA driver for CUDA 12.x or higher (yours only\n"
    "│ supports up to CUDA 11.4.0)\n",
])
def test_a_wrapped_driver_too_old_message_is_joined_and_leads(text):
    assert len(text.splitlines()) == 2
    assert len(unwrap_lines(text).splitlines()) == 1
    assert lead(text) == ("GH601", Severity.CRITICAL)


@pytest.mark.parametrize("text", [
    # two messages of their own: the second line does not complete a driver-too-old message across the break
    "CUDA driver version is insufficient for CUDA runtime version\nCUDA error: no kernel image is available\n",
    "CUDA Version: 12.4\nDriver Version: 550.54.15\n",
    "The CUDA driver is fine here.\nyour driver (which supports up to 12.4)\n",
])
def test_lines_that_complete_no_message_stay_apart(text):
    assert unwrap_lines(text) == text


def test_the_join_is_linear():
    import time

    text = "CUDA driver version is insufficient for\n" * 5000
    started = time.perf_counter()
    unwrap_lines(text)
    assert time.perf_counter() - started < 5


SMI_HEADER = "| NVIDIA-SMI 440.100      Driver Version: 440.100      CUDA Version: 10.2     |\n"


def test_the_cuda_a_program_names_is_held_to_the_driver():
    # CUDA.jl's two-line warning and nvidia-smi's header: GH601 names the CUDA CUDA.jl uses and the branch it needs
    result = report(JULIA_OLD + "\n" + SMI_HEADER)
    finding = result.findings[0]
    assert finding.code == "GH601" and finding.severity == Severity.CRITICAL
    assert "CUDA 11.0.0 (the CUDA CUDA.jl uses) needs driver >= 450" in finding.message
    assert any("cuda-drivers-450" in fix.command for fix in finding.fixes)


@pytest.mark.parametrize(("text", "cuda", "program"), [
    (JULIA_OLD, "11.0.0", "CUDA.jl"),
    ("┌ Warning: You are using CUDA toolkit 11.1.0 with a driver that only supports up to 10.2.\n", "11.1.0",
     "CUDA.jl"),
    ("W external/xla/xla/service/gpu/nvptx_compiler.cc:765] The NVIDIA driver's CUDA version is 12.2 which is older "
     "than the ptxas CUDA version (12.6.20). Because the driver is older\n", "12.6.20", "XLA's ptxas"),
])
def test_the_program_cuda_is_read_from_its_message(text, cuda, program):
    snapshot, _ = analyze_texts([("paste.txt", text)])
    assert snapshot.cuda is not None
    assert (snapshot.cuda.program_cuda, snapshot.cuda.program_name) == (cuda, program)


@pytest.mark.parametrize("text", [
    "CUDA toolchain:\n- runtime 12.6, artifact installation\n- driver 560.35.3 for 12.6\n",  # CUDA.versioninfo()
    "CUDA 12.4 is supported by your driver (which supports up to 12.4)\n",
    SMI_HEADER,
])
def test_a_banner_or_a_driver_new_enough_names_no_program_cuda(text):
    snapshot, _ = analyze_texts([("paste.txt", text)])
    assert snapshot.cuda is None or snapshot.cuda.program_cuda is None


@pytest.mark.parametrize("line", [
    "CUDA backend failed to initialize: Found CUDA version 12010, but JAX was built against version 12020, which is "
    "newer. The copy of CUDA that is installed must be at least as new as the version against which JAX was built.",
    "RuntimeError: Outdated cuDNN installation found.",
])
def test_jax_s_own_library_check_is_a_library_not_the_driver(line):
    # jax's _version_check compares the CUDA libraries it loads (cudaRuntimeGetVersion, cudnnGetVersion ...) with
    # its build: an old library, not an old driver (GH612, not GH601)
    sig = match_line(line)
    assert sig is not None and sig.id == "jax-outdated-cuda-library" and sig.code == "GH612"
    assert lead(line + "\n")[0] == "GH612"
