"""The container toolkit's and the driver installer's messages mined from their source (knowledge/mined/tools.csv,
tools/mine/mine_tools.py): every row is sound and finds itself, an error line pasted alone is never HEALTHY nor only
"unknown", the JSON carries the source, a family's cause is named, and the table is read only when needed."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys

import pytest

import mined_helpers
from gpuhealth.checks import catalogue
from gpuhealth.checks.registry import REGISTRY
from gpuhealth.knowledge import mined_tools, read_table
from gpuhealth.knowledge.causes import causes
from gpuhealth.model import Report, Severity
from gpuhealth.report import json_report
from repo_paths import REPO

MINER = REPO / "tools" / "mine" / "mine_tools.py"
sys.path.insert(0, str(MINER.parent))
import mine_tools  # noqa: E402  (the miner: its sources and pinned tags)

ROWS = mined_tools.messages()
# A conversion (C printf, or Go's verbs as the miner reads them), filled the way a program would fill it.
SPEC = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|q|I64)?([diouxXeEfgGcsp%vwqT])")
FILL = {"d": "1", "i": "1", "u": "7", "o": "7", "x": "1f", "X": "1F", "c": "c", "p": "0x1f", "%": "%"}
INSTALLER = "NVIDIA/nvidia-installer"
LIBNVC = "NVIDIA/libnvidia-container"
PLUGIN, OPERATOR, MIG = "NVIDIA/k8s-device-plugin", "NVIDIA/gpu-operator", "NVIDIA/mig-parted"
KLOG = "E0101 00:00:00.000000       1 main.go:1] "  # the device plugin's klog prefix
PREFIX = {INSTALLER: "ERROR: ", LIBNVC: "nvidia-container-cli: ", PLUGIN: KLOG,
          OPERATOR: 'time="2026-01-01T00:00:00Z" level=error msg="', MIG: "FATA[0000] "}


def render(row) -> str:
    """The row's message as a pasted line: the installer's "ERROR: " prefix, the toolkit's logrus prefix,
    libnvidia-container's program name (nvidia-container-cli prints every message after it)."""
    text = SPEC.sub(lambda m: FILL.get(m.group(1), "x"), row.format)
    if row.repository == LIBNVC and not row.format.endswith(" error"):
        text = "initialization error: " + text  # the stage nvidia-container-cli names before the library's message
    return PREFIX.get(row.repository, "ERRO[0000] ") + text


def report(text: str, name: str = "paste.txt") -> Report:
    return mined_helpers.report(text, name)


# ---------------------------------------------------------------- the table

def test_the_table_covers_every_source_and_both_levels():
    for repository in (INSTALLER, "NVIDIA/nvidia-container-toolkit", LIBNVC, PLUGIN, OPERATOR, MIG):
        levels = {row.level for row in ROWS if row.repository == repository}
        assert levels == {"error", "warning"}, repository
    assert len(ROWS) > 500


def test_every_row_compiles_finds_itself_and_has_complete_provenance():
    ids = set()
    for row in ROWS:
        re.compile(row.pattern)
        source = next(s for s in mine_tools.SOURCES.values() if s.repository == row.repository)
        order = {tag: i for i, tag in enumerate(source.tags or [commit for _, commit in source.pins])}
        assert row.first_tag in order and row.last_tag in order and order[row.first_tag] <= order[row.last_tag]
        if source.pins:  # read file by file: the row's place is its file at that file's pinned commit
            assert (row.file, row.last_tag) in source.pins and re.fullmatch(r"[0-9a-f]{40}", row.last_tag), row.id
        assert row.file and row.line > 0 and row.id not in ids and row.family in mined_tools.families()
        ids.add(row.id)
        line = render(row)
        found = mined_tools.match(line)
        assert found is not None, (row.id, line)
        # the most specific row wins: another row may hold this one's text and more
        assert found.id == row.id or found.fixed_chars >= row.fixed_chars, (row.id, found.id, line)


def test_families_point_to_real_checks_and_causes_and_the_last_takes_the_rest():
    catalogue.load()
    codes, known = set(REGISTRY), set(causes())
    for family in mined_tools.families().values():
        assert not family.code or family.code in codes, family.id
        assert not family.cause or family.cause in known, family.id
        assert set(family.explains) <= codes and family.meaning and family.source_url.startswith(
            "https://github.com/NVIDIA/"), family.id


def test_a_toolkit_row_needs_the_container_stack_on_the_line():
    """A generic toolkit message ("failed to create output file") on a line of another program is not claimed."""
    assert mined_tools.match("ERRO[0000] failed to create output file") is not None
    assert mined_tools.match("backup: failed to create output file") is None
    assert mined_tools.match("Unable to find the kernel source tree for the currently running kernel.  x") is None


def test_libnvidia_container_rows_need_its_name_and_its_stage_ranks_after_the_message_inside():
    """Its messages are short ("open failed"): a row is read only on a line naming nvidia-container-cli, and the
    library's message inside a stage ("initialization error: nvml error: ...") is the row found, not the stage."""
    assert mined_tools.match("backup: open failed: /etc/x: permission denied") is None
    row = mined_tools.match("nvidia-container-cli: mount error: open failed: /proc/1/ns/mnt: permission denied")
    assert row is not None and row.repository == LIBNVC and row.file == "src/xfuncs.h"
    inner = mined_tools.match("nvidia-container-cli: initialization error: nvml error: insufficient permissions")
    assert inner.family == "nvc-nvml" and inner.file == "src/driver.c"
    stage = mined_tools.match("nvidia-container-cli: detection error: something new")
    assert stage is not None and stage.format == "detection error" and stage.fixed_chars < inner.fixed_chars
    assert mined_tools.program(inner) == "libnvidia-container"
    # its debug log (--debug, NVC_DEBUG_FILE) names the source file instead of the program
    debug = mined_tools.match("E0114 04:33:38.293546 1234 nvc.c:280] could not load kernel module nvidia")
    assert debug is not None and debug.family == "nvc-kernel-module"
    assert mined_tools.program(stage) == "libnvidia-container's nvidia-container-cli"
    # a GPU the container asks for that the host lacks (NVIDIA_VISIBLE_DEVICES=1 on a one-GPU host)
    device = mined_tools.match("nvidia-container-cli: device error: 1: unknown device: unknown.")
    assert device.family == "nvc-device" and device.file == "src/cli/common.c"
    family = mined_tools.families()["nvc-device"]
    assert family.code == "GH608" and family.cause == "device-index-beyond-count"


def test_every_libnvidia_container_error_pasted_alone_is_never_healthy_nor_only_unknown():
    """A line starting with "nvidia-container-cli:" is also the shape `nvidia-container-cli info` fails with: its
    reader reads NVML's failures, and any other error it prints is still an error line (GH310)."""
    rows = [row for row in ROWS if row.repository == LIBNVC and row.level == "error"]
    assert len(rows) >= 30
    for row in rows:
        line = render(row)
        result = report(line + "\n")
        assert result.verdict not in ("HEALTHY", "NO DIAGNOSIS"), line
        said = {f.code for f in result.findings if f.code not in ("GH002", "GH003", "GH004")}
        assert said, (line, [f.code for f in result.findings])


def test_a_libnvidia_container_line_in_dockers_error_leads_to_its_cause():
    line = ("docker: Error response from daemon: OCI runtime create failed: error running hook #0: error running "
            "hook: exit status 1, stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: "
            "brand = tesla: unknown.")
    result = report(line + "\n")
    (finding,) = [f for f in result.findings if f.code == "GH310"]
    assert finding.message.startswith("libnvidia-container's nvidia-container-cli (dsl.c) reported an error: ")
    assert "(see GH601)" in finding.message
    document = json.loads(json_report.render(result))
    (gh310,) = [f for f in document["findings"] if f["code"] == "GH310"]
    assert gh310["labels"]["cause"] == "cuda-newer-than-driver" and gh310["labels"]["family"] == "nvc-requirement"
    assert gh310["labels"]["source"].startswith(f"{LIBNVC} 61bfaf38ca40edbe91bf20f52623f78e729e87d5 src/cli/dsl.c:")


def test_a_wrapped_go_error_is_read_for_its_innermost_message():
    """Go wraps an error in its callers' messages: the last one found in the line says what failed."""
    line = (KLOG + "error starting plugins: error creating plugin manager: unable to create plugin manager: failed "
            "to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
    row = mined_tools.match(line)
    assert row.repository == PLUGIN and row.format == "failed to initialize NVML" and row.family == "k8s-nvml"
    assert mined_tools.program(row) == "the NVIDIA device plugin"
    result = report(line + "\n")
    (finding,) = [f for f in result.findings if f.code == "GH310"]
    assert "(see GH802)" in finding.message and finding.labels["cause"] == "container-toolkit-missing"
    assert finding.labels["source"].startswith(f"{PLUGIN} v0.")
    # without klog's prefix or a name of the programs, a device plugin row does not claim a line
    assert mined_tools.match("backup.go: unable to create plugin manager") is None


def test_the_gpu_operators_validator_names_the_driver_not_ready():
    line = 'time="2026-01-01T00:00:00Z" level=info msg="Error: error validating driver installation: exit status 1"'
    row = mined_tools.match(line)
    assert row.repository == OPERATOR and row.family == "validator-driver" and row.component == "nvidia-validator"
    result = report(line + "\n")
    assert any(f.code == "GH310" and "(see GH203)" in f.message for f in result.findings)


def test_mig_parted_reset_failure_confirms_the_pending_mig_mode_change():
    """nvidia-mig-parted resets the GPUs only when a MIG mode change it set is pending (apply/mode.go): its failed
    reset, wrapped in its callers' messages and printed once through logrus' Fatal, leads with GH409; nvidia-smi's
    refusal printed above it is the symptom it explains (a hand-written paste in the shape the source prints)."""
    line = ("FATA[0002] Error applying MIG configuration with hooks: error setting MIG mode: error resetting all GPUs: "
            "exit status 255")
    row = mined_tools.match(line)
    assert row.repository == MIG and row.family == "mig-reset" and row.file == "cmd/nvidia-mig-parted/apply/mode.go"
    assert mined_tools.program(row) == "nvidia-mig-parted" and mined_tools.families()["mig-reset"].decides == "confirms"
    text = "The following GPUs could not be reset:\n  GPU 00000000:07:00.0: In use by another client\n\n" + line + "\n"
    result = report(text)
    lead = result.findings[0]
    assert lead.code == "GH409" and lead.severity is Severity.WARNING, [(f.code, f.message) for f in result.findings]
    # the logrus prefix alone on the line above nvidia-smi's output is no unknown error line
    assert not any(f.code == "GH003" for f in report("ERRO[0002] \n" + text).findings)
    # without logrus' prefix or the program's name, its generic messages claim no other program's line
    assert mined_tools.match("backup: error resetting all GPUs: exit status 1") is None
    # a client the MIG manager could not stop points to what holds the GPU, and only suggests it
    held = mined_tools.match('time="2026-01-01T00:00:00Z" level=error msg="dcgm-exporter pod did not shutdown"')
    assert held.family == "mig-clients" and mined_tools.families()["mig-clients"].cause == "gpu-service-holds-gpu"
    gone = mined_tools.match("FATA[0000] Error enumerating GPUs: error checking if nvidia module loaded: nvidia module "
                             "not loaded")
    assert gone.family == "mig-module-not-loaded"
    # the MIG layout steps and the configuration steps are families of their own, with no cause they could decide
    layout = mined_tools.match("FATA[0000] Error applying MIG configuration with hooks: error setting MIGConfig: error "
                               "attempting multiple config orderings: all orderings failed")
    assert layout.family == "mig-instances" and not mined_tools.families()["mig-instances"].cause
    assert mined_tools.match("FATA[0000] Error parsing config file: unmarshal error: x").family == "mig-config"


@pytest.mark.parametrize(("line", "family", "cause"), [
    # nvidia-installer's misc.c: a driver installed by another route (distribution packages) stopped the run
    ("ERROR: The installation was canceled due to the availability or presence of an alternate driver installation.",
     "installer-alternate-install", "install-routes-mixed"),
    ("WARNING: This system requires the open GPU kernel modules, but contains GPUs which are not supported by the open",
     "installer-gpu-unsupported", "driver-gpu-unsupported"),
    # the toolkit: an image requirement not met, CDI devices no specification names, no kernel module
    ("ERRO[0000] failed to construct modifier: requirements not met: cuda>=12.4",
     "container-requirement", "cuda-newer-than-driver"),
    ("ERRO[0000] could not resolve CDI devices: unresolvable CDI devices nvidia.com/gpu=all",
     "container-cdi-unresolved", "cdi-spec-missing"),
    ("ERRO[0000] failed to load module nvidia: exit status 1", "container-kernel-module", "driver-not-loaded"),
    # libnvidia-container: the file it mounts a driver file onto exists in the image
    ("nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/0/merged/usr/lib/x/libnvcuvid"
     ".so.1: file exists", "nvc-file-creation", "image-ships-driver-libs"),
])
def test_finer_families_name_the_cause_their_source_context_gives(line, family, cause):
    """Catch-all families split by the cause the printing code's context gives (hand-written lines in the shape the
    source prints); each only suggests it: the message alone does not prove it."""
    row = mined_tools.match(line)
    assert row is not None and row.family == family, (line, row)
    found = mined_tools.families()[family]
    assert found.cause == cause and found.decides == "suggests" and found.code


def test_the_device_plugins_runtime_hint_confirms_the_toolkit_cause():
    """k8s-device-plugin's factory.go prints the hint after neither NVML nor a Tegra GPU was found in its own pod. Under
    the NVIDIA runtime its pod (NVIDIA_VISIBLE_DEVICES=all in the image) gets the driver's libraries, or fails to start
    with the runtime's own error when the host has no driver; a plugin that runs and finds no NVML ran without that
    runtime. So this family confirms its cause (GH802 leads and the mined finding folds under it)."""
    row = mined_tools.match(KLOG + "If this is a GPU node, did you configure the NVIDIA Container Toolkit?")
    assert row is not None and row.family == "k8s-runtime"
    found = mined_tools.families()["k8s-runtime"]
    assert (found.code, found.cause, found.decides) == ("GH802", "container-toolkit-missing", "confirms")


def test_libnvidia_container_ldcache_and_cgroup_messages_are_rows_of_their_files():
    """utils.c, nvc_ldcache.c and cgroup.c were read at pinned commits: ldconfig run in the container and the device
    cgroup each have a family; a message two pinned files print stays the first file's row."""
    ldcache = mined_tools.match("nvidia-container-cli: ldcache error: process /sbin/ldconfig.real failed with error "
                                "code: 1")
    assert ldcache.family == "nvc-ldcache" and ldcache.file == "src/nvc_ldcache.c" and ldcache.line > 0
    cgroup = mined_tools.match("nvidia-container-cli: container error: failed to get device cgroup mount path: "
                               "relative path in mount prefix")
    assert cgroup.family == "nvc-cgroup" and cgroup.file == "src/cgroup.c"
    opened = mined_tools.match("nvidia-container-cli: mount error: open failed: /sys/fs/cgroup/devices/x: no such file")
    assert opened.file == "src/xfuncs.h" and opened.first_tag == opened.last_tag


# ---------------------------------------------------------------- analyze

def test_thirty_random_error_lines_pasted_alone_are_never_healthy_nor_only_unknown():
    errors = [row for row in ROWS if row.level == "error"]
    for row in random.Random(21).sample(errors, 30):
        line = render(row)
        result = report(line + "\n")
        assert result.verdict not in ("HEALTHY", "NO DIAGNOSIS"), line
        said = {f.code for f in result.findings if f.code not in ("GH002", "GH003", "GH004")}
        assert said, (line, [f.code for f in result.findings])
        assert not any(f.code == "GH003" for f in result.findings), line


def test_a_mined_line_says_what_printed_it_what_it_means_its_cause_and_its_source():
    line = "ERROR: Failed to install the kernel module through DKMS. No kernel module was installed;"
    row = mined_tools.match(line)
    assert row is not None and row.family == "installer-dkms"
    result = report(line + "\n")
    (finding,) = [f for f in result.findings if f.code == "GH310"]
    assert finding.severity is Severity.CRITICAL
    assert finding.message.startswith(f"nvidia-installer ({os.path.basename(row.file)}) reported an error: ")
    assert "(see GH507)" in finding.message
    document = json.loads(json_report.render(result))
    (gh310,) = [f for f in document["findings"] if f["code"] == "GH310"]
    assert gh310["labels"]["mined"] == row.id and gh310["labels"]["cause"] == "module-not-built"
    assert gh310["labels"]["source"] == f"{INSTALLER} {row.tags} {row.file_line}"


def test_analyze_without_error_lines_never_reads_the_table():
    probe = mined_helpers.imported("gpuhealth.knowledge.mined_tools")
    plain = mined_helpers.analyze_in_child("Tue Dec  1 10:00:00 2026\nall good here\n", probe)
    assert "NOT-MINED" in plain, plain[-500:]


# ---------------------------------------------------------------- regenerate and compare

CHECKOUTS = os.environ.get("GPUHEALTH_MINE_TOOLS_CHECKOUTS", str(REPO / "tools" / "mine" / "checkouts"))
PRESENT = all(os.path.exists(os.path.join(CHECKOUTS, name)) for name in mine_tools.SOURCES)


@pytest.mark.skipif(not PRESENT, reason=f"no checkouts of {', '.join(mine_tools.SOURCES)} under {CHECKOUTS} (set "
                                        "GPUHEALTH_MINE_TOOLS_CHECKOUTS; CI has no network): tools.csv is not "
                                        "regenerated and compared")
def test_the_miner_regenerates_the_committed_table():
    done = subprocess.run([sys.executable, str(MINER), "--checkouts", CHECKOUTS, "--out", "-"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == read_table(mined_tools.TABLE)
    assert "distinct patterns" in done.stderr  # the coverage per source
