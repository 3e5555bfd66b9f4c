"""The NVIDIA driver's messages mined from its source (knowledge/mined/nvrm.csv, tools/mine/mine_nvrm.py): every row
is sound and finds itself, an error-level line pasted alone is never HEALTHY nor only "unknown", a family that points
to a cause leads over its symptom, the JSON carries the source, and the table is read only when needed."""

from __future__ import annotations

import csv
import hashlib
import io
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
from gpuhealth.knowledge import mined, read_table
from gpuhealth.knowledge.causes import causes
from gpuhealth.model import Report, Severity
from gpuhealth.report import json_report
from gpuhealth.report.common import fold
from repo_paths import REPO

MINER = REPO / "tools" / "mine" / "mine_nvrm.py"
sys.path.insert(0, str(MINER.parent))
import mine_nvrm  # noqa: E402  (the miner: its pinned tags)

ROWS = mined.messages()
# A printf conversion, rendered the way the driver would fill it (independently of the miner's pattern builder).
SPEC = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|q|I64)?([diouxXeEfgGcsp%])")
FILL = {"d": "1", "i": "1", "u": "7", "o": "7", "x": "1f", "X": "1F", "c": "c", "s": "x", "p": "0x1f", "%": "%"}


def render(fmt: str) -> str:
    return SPEC.sub(lambda m: FILL.get(m.group(1), "1.5"), fmt)


def report(text: str, name: str = "dmesg.log") -> Report:
    return mined_helpers.report(text, name)


# ---------------------------------------------------------------- the table

def test_the_table_is_large_and_covers_both_levels():
    levels = {row.level for row in ROWS}
    assert len(ROWS) > 3000 and levels == {"error", "warning"}


def test_every_row_has_a_compiling_pattern_and_complete_provenance():
    order = {tag: i for i, tag in enumerate(mine_nvrm.TAGS)}
    ids = set()
    for row in ROWS:
        re.compile(row.pattern)
        assert row.id == "nvrm-" + hashlib.sha1(row.pattern.encode()).hexdigest()[:10], row
        assert row.id not in ids
        ids.add(row.id)
        assert row.component and row.family in mined.families() and row.format.strip()
        assert row.file and row.line > 0 and not row.file.startswith("/"), row
        assert order[row.first_tag] <= order[row.last_tag], row
        assert row.repository == mine_nvrm.REPOSITORY == "NVIDIA/open-gpu-kernel-modules"
        assert row.url == f"https://github.com/{row.repository}/blob/{row.last_tag}/{row.file}#L{row.line}"


def test_a_line_rendered_from_each_format_matches_its_row_and_is_found_through_the_index():
    """Each row's format filled in (%d as 1, %s as x, %x as 1f ...) behind an NVRM tag and the function name that
    NV_PRINTF prints: its own pattern matches, and ``lookup`` finds it, or a row with more fixed text that the
    same line also fits (two formats can print the same line)."""
    same = 0
    for row in ROWS:
        line = f"kgspSomeFunction: {render(row.format)}"
        assert re.search(row.pattern, line), (row.id, row.format, line)
        assert row.key in line.lower(), row  # the index key is a word of the line
        found = mined.lookup(line)
        assert found is not None, (row.id, line)
        assert found.id == row.id or (found.fixed_chars >= row.fixed_chars and re.search(found.pattern, line))
        same += found.id == row.id
    assert same >= 0.97 * len(ROWS)


def test_a_line_that_is_no_driver_message_finds_no_row():
    assert mined.lookup("loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build") is None
    assert mined.lookup("the quick brown fox jumps over the lazy dog") is None


def test_the_families_point_to_checks_and_causes_that_exist():
    known = set(causes())
    catalogue.load()
    codes = set(REGISTRY)
    rows = list(mined.families().values())
    for family in rows:
        assert family.code == "" or family.code in codes, family.id
        assert family.cause == "" or family.cause in known, family.id
        assert set(family.explains) <= codes, family.id
        assert family.severity in ("critical", "warning", "info") and family.meaning and family.source_url.startswith(
            "https://github.com/NVIDIA/open-gpu-kernel-modules")
    last = rows[-1]
    text = read_table("mined_families.csv")
    assert list(csv.DictReader(io.StringIO(text)))[-1]["components"] == "" and last.id == "driver"


# ---------------------------------------------------------------- analyze

def test_forty_random_error_lines_pasted_alone_are_never_healthy_nor_only_unknown():
    """The issue's measure: 40 error-level messages of the driver's source, each pasted alone as a dmesg line."""
    errors = [row for row in ROWS if row.level == "error"]
    picked = random.Random(21).sample(errors, 40)
    for row in picked:
        line = f"[  812.401377] NVRM: someFunction: {render(row.format)}\n"
        result = report(line)
        if mined.families()[row.family].severity == "info":  # a notice (a deprecation printed at error level)
            assert [f.labels["family"] for f in result.findings if f.code == "GH308"] == [row.family], line
            continue
        assert result.verdict != "HEALTHY", line
        said = {f.code for f in result.findings if f.severity is not Severity.INFO}
        assert said - {"GH003", "GH306"}, (line, said)  # more than "a line gpuhealth does not know"


def test_a_mined_line_says_what_printed_it_what_it_means_and_where_the_source_is():
    result = report("[ 14.001001] NVRM: kgspInitRm_IMPL: unexpected WPR2 already up, cannot proceed with booting GSP\n")
    (finding,) = [f for f in result.findings if f.code == "GH308"]
    assert finding.severity is Severity.WARNING
    assert "the NVIDIA driver (kernel_gsp.c) reported an error: kgspInitRm_IMPL: unexpected WPR2" in finding.message
    assert "it means the GSP firmware could not be started (see GH303)" in finding.message
    document = json.loads(json_report.render(result))
    (gh308,) = [f for f in document["findings"] if f["code"] == "GH308"]
    row = mined.lookup("unexpected WPR2 already up, cannot proceed with booting GSP")
    assert gh308["labels"]["mined"] == row.id and gh308["labels"]["family"] == "gsp-boot"
    assert gh308["labels"]["source"] == f"NVIDIA/open-gpu-kernel-modules {row.tags} {row.file_line}"
    assert row.file == "src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c"
    assert not any(f.code in ("GH003", "GH306") for f in result.findings)


def test_the_reason_printed_above_rminitadapter_failed_leads_its_finding():
    """RmInitAdapter's code does not say why; the driver's line just above it does, and the leading finding says it."""
    text = ("[   14.001001] NVRM: kgspInitRm_IMPL: unexpected WPR2 already up, cannot proceed with booting GSP\n"
            "[   14.001107] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x62:0x40:1902)\n")
    lead = fold(report(text).findings)[0].finding
    assert lead.code == "GH303" and lead.message.endswith(
        "the driver said why just before: kernel_gsp.c: kgspInitRm_IMPL: unexpected WPR2 already up, cannot proceed "
        "with booting GSP (the GSP firmware could not be started)")
    # a reason logged for another GPU, or far above, is not this failure's
    other = text.replace("NVRM: kgspInitRm_IMPL:", "NVRM: GPU 0000:02:00.0: kgspInitRm_IMPL:")
    assert "said why" not in next(f for f in report(other).findings if f.code == "GH303").message
    far = text.replace("\n[   14.001107]", "\n" + "[   14.0011] NVRM: loading\n" * 0 + "x\n" * 9 + "[   14.001107]")
    assert "said why" not in next(f for f in report(far).findings if f.code == "GH303").message


def test_families_split_from_the_kernel_interface_catch_all_name_their_cause():
    """osapi.c's client version check proves a driver/library mismatch (it prints both versions); osinit.c's GSP
    firmware checks point to a firmware of another driver version; rm_init_*() failures are GPU initialisation."""
    mismatch = mined.lookup("NVRM: API mismatch: the client has the version 535.129.03, but")
    assert mismatch.family == "api-mismatch" and mismatch.file.endswith("osapi.c")
    # the message's later lines, logged as lines of their own, belong to it too
    assert mined.lookup("NVRM: this kernel module has the version 550.54.15.  Please").family == "api-mismatch"
    family = mined.families()["api-mismatch"]
    assert (family.code, family.cause, family.decides) == ("GH202", "driver-library-mismatch", "confirms")
    firmware = mined.lookup("NVRM: The GSP firmware version must exactly match the RM (nv-kernel.o) build.")
    assert firmware.family == "gsp-firmware-version"
    assert mined.families()["gsp-firmware-version"].cause == "gsp-firmware-missing"
    assert mined.lookup("NVRM: GPU 0000:65:00.0: rm_init_private_state() failed!").family == "gpu-init"
    # kern_bus_gh100.c: the static BAR1 mapping between two GPUs through the IOMMU failed (peer-to-peer)
    peer = mined.lookup("NVRM: _kbusCreateStaticBar1IOMMUMappingForGpuPair: IOMMU mapping failed from GPU0 to GPU1")
    assert peer.family == "p2p-iommu" and mined.families()["p2p-iommu"].cause == "p2p-blocked-iommu-acs"


def test_a_warning_level_message_is_information_and_a_known_signature_keeps_its_row():
    warning = next(row for row in ROWS if row.level == "warning" and row.family == "memory")
    result = report(f"[ 9.1] NVRM: fn: {render(warning.format)}\n")
    assert [f.severity for f in result.findings if f.code == "GH308"] == [Severity.INFO]
    # the catalogue's own row (written for the line, with its cause) is not repeated by GH308
    known = report("[   23.991667] NVRM: RmFetchGspRmImages: No firmware image found\n")
    assert not any(f.code == "GH308" for f in known.findings)


def test_analyze_without_driver_lines_never_reads_the_table():
    probe = mined_helpers.imported("gpuhealth.knowledge.mined")
    plain = mined_helpers.analyze_in_child("Failed to initialize NVML: Unknown Error\n", probe)
    assert "NOT-MINED" in plain, plain[-500:]
    nvrm = mined_helpers.analyze_in_child("[ 5.2] NVRM: osInitNvMapping: *** Cannot attach gpu\n", probe)
    assert "MINED" in nvrm and "NOT-MINED" not in nvrm


# ---------------------------------------------------------------- regenerate and compare

CHECKOUT = os.environ.get("GPUHEALTH_MINE_CHECKOUT", str(REPO / "tools" / "mine" / "checkouts"
                                                         / "open-gpu-kernel-modules"))


@pytest.mark.skipif(not os.path.exists(CHECKOUT),
                    reason=f"no checkout of NVIDIA/open-gpu-kernel-modules at {CHECKOUT} (set GPUHEALTH_MINE_CHECKOUT; "
                           "CI has no network): the mined table is not regenerated and compared")
def test_the_miner_regenerates_the_committed_table():
    done = subprocess.run([sys.executable, str(MINER), "--checkout", CHECKOUT, "--out", "-"], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == read_table(mined.TABLE)
    assert "turned into patterns" in done.stderr  # the coverage per tag
