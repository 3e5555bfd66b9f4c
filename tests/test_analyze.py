"""`gpuhealth analyze` over the real corpus: what each file is taken for, and the findings it gives."""

from __future__ import annotations

import gzip
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CORPUS, corpus_files, corpus_id
from gpuhealth.analyze import EvidenceError, analyze_texts, decode_bytes, identify
from gpuhealth.checks.engine import run_checks
from gpuhealth.checks.registry import Expectations
from gpuhealth.model import Severity

# What each corpus file must be recognised as (first matching pattern wins; None = not recognised).
EXPECTED_KIND = [
    (r"\.xml$", "smi-xml"),
    (r"nvidia-smi-q_|nvidia-smi-query|nvidia-smi_-q|nvsmi8_output", "smi-query"),
    (r"nvidia-smi_8xV100|nvidia-smi\.5\d\d\.", "smi-table"),
    (r"tesla-p100\.csv", "smi-csv"),
    (r"list_gpus", "smi-list"),
    (r"topo-m_(?!legend)", "smi-topo"),
    (r"topo-p2p", "smi-topo-p2p"),
    (r"nvlink", "smi-nvlink"),
    (r"lspci(?!_-t)", "lspci"),
    (r"lsmod", "lsmod"),
    (r"proc_driver_nvidia_version", "proc-version"),
    (r"proc_driver_nvidia_params", "driver-params"),
    (r"pytorch-collect-env/", "collect-env"),
    (r"dmesg|kmsg|pstore|journalctl", "kernel-log"),
]
CONTAINERS = ("nvidia-bug-report.log", "nvidia-gpu-exporter/linux-", "output_ubuntu")


def expected_kind(name: str) -> str | None:
    return next((kind for pattern, kind in EXPECTED_KIND if re.search(pattern, name)), None)


ALL = [p for p in corpus_files("**/*") if not p.name.endswith(".md")]


@pytest.mark.parametrize("path", ALL, ids=corpus_id)
def test_every_corpus_file_is_analysed_without_crashing(path):
    snapshot, recognised = analyze_texts([(corpus_id(path), decode_bytes(path.name, path.read_bytes()))])
    report = run_checks(snapshot)
    assert not [f for f in report.findings if f.code == "GH001"], "a check raised on this evidence"
    name = corpus_id(path)
    if name.startswith(CONTAINERS):
        assert sum(1 for r in recognised if r.kind) >= 2, "a container file should yield several pieces"
        return
    kind = expected_kind(name)
    if kind is not None:
        assert [r.kind for r in recognised] == [kind], recognised
        assert not recognised[0].note, recognised[0].note


def _report(*names: str):
    texts = [(n, decode_bytes(n, (CORPUS / n).read_bytes())) for n in names]
    snapshot, _ = analyze_texts(texts)
    return run_checks(snapshot)


def test_ecc_xid_sequence_is_attributed_and_graded():
    report = _report("gpud/query_log_tail__dmesg.0.log")
    xids = {int(re.match(r"Xid (\d+)", f.message)[1]): f for f in report.findings if f.code == "GH301"}
    assert xids[48].severity is Severity.CRITICAL and xids[63].severity is Severity.INFO
    assert xids[94].subject.pci_address == "0000:19:00.0"
    assert "x" in xids[94].message and "first" in xids[94].message  # counted, with first/last time
    assert report.verdict == "BROKEN"


def test_application_xid_storm_is_summarised_and_never_critical():
    report = _report("gpud/dmesg__dmesg.decode.iso.log.0")
    xid13 = [f for f in report.findings if f.message.startswith("Xid 13")]
    assert xid13 and all(f.severity is not Severity.CRITICAL for f in xid13)
    assert all(len(e.lines) <= 4 for f in xid13 for e in f.evidence)  # storms are summarised
    assert report.verdict == "DEGRADED"


def test_gsp_timeout_xid_119_needs_a_reset():
    report = _report("gpud/accelerator_nvidia_error_xid__dmesg-with-xid-119.log")
    xid119 = next(f for f in report.findings if f.message.startswith("Xid 119"))
    assert xid119.severity is Severity.CRITICAL
    assert any("gpu-reset" in fix.command for fix in xid119.fixes)


def test_bug_report_gives_driver_gpu_and_pci_view():
    report = _report("nvidia-bug-report-352.63/nvidia-bug-report.log")
    snapshot = report.snapshot
    assert snapshot.driver.version == "352.63" and snapshot.driver.flavour == "proprietary"
    assert [g.name for g in snapshot.gpus] == ["GeForce GTX TITAN X"]
    assert [d.address for d in snapshot.nvidia_pci_gpus] == ["0000:06:00.0"]
    assert "GH102" not in {s.code for s in report.skipped}  # PCI and driver views were both there
    assert report.verdict == "HEALTHY"


def test_several_files_combine_into_one_report():
    report = _report("gpud/accelerator_nvidia_query__nvidia-smi-query.535.161.08.out.0.valid",
                     "gpud/query_log_tail__dmesg.0.log")
    xid48 = next(f for f in report.findings if f.message.startswith("Xid 48"))
    assert xid48.subject.gpu_index == 0  # the kernel log's address matched the nvidia-smi GPU
    assert len(report.snapshot.gpus) == 8


def test_gzip_bug_report_and_bomb_guard(tmp_path, monkeypatch):
    raw = (CORPUS / "nvidia-bug-report-352.63/nvidia-bug-report.log").read_bytes()
    assert decode_bytes("r.gz", gzip.compress(raw)) == raw.decode("utf-8", errors="replace")
    import gpuhealth.analyze as analyze

    monkeypatch.setattr(analyze, "MAX_DECOMPRESSED", 1000)
    with pytest.raises(EvidenceError, match="decompresses to more than"):
        decode_bytes("r.gz", gzip.compress(raw))
    with pytest.raises(EvidenceError, match="corrupt gzip"):
        decode_bytes("r.gz", b"\x1f\x8b\x08garbage")


def test_unrecognised_file_is_named_not_fatal():
    snapshot, _ = analyze_texts([("notes.txt", "lunch at noon\nremember the milk\n")])
    report = run_checks(snapshot)
    # nothing understood: NO DIAGNOSIS (exit 3), never HEALTHY; the file is named in both findings
    assert [f.code for f in report.findings] == ["GH004", "GH002"]
    assert report.verdict == "NO DIAGNOSIS" and report.exit_code == 3
    assert all("notes.txt" in f.message for f in report.findings)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_analyze_survives_any_text(text):
    snapshot, _ = analyze_texts([("paste", text)])
    run_checks(snapshot)
    identify(text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ALL), st.integers(0, 10**6), st.integers(0, 10**6))
def test_analyze_survives_cut_real_files(path, start, length):
    text = path.read_text(errors="replace")
    start %= max(len(text), 1)
    snapshot, _ = analyze_texts([("cut", text[start:start + length % 20000])])
    report = run_checks(snapshot)
    assert not [f for f in report.findings if f.code == "GH001"]


# --------------------------------------------------------------------------- install and host evidence


BUG_REPORT = "nvidia-bug-report-352.63/nvidia-bug-report.log"


def test_bug_report_cmdline_params_and_installer_log_land_in_the_snapshot():
    snapshot, recognised = analyze_texts([(BUG_REPORT, decode_bytes("r", (CORPUS / BUG_REPORT).read_bytes()))])
    kinds = {r.piece.split(": ", 1)[1]: r.kind for r in recognised if r.kind}
    assert kinds["/proc/cmdline"] == "kernel-cmdline"
    assert kinds["/proc/driver/nvidia/./params"] == "driver-params"
    assert kinds["/var/log/nvidia-installer.log"] == "installer-log"
    env = snapshot.host_env
    assert env.kernel_cmdline.startswith("BOOT_IMAGE=/boot/vmlinuz-4.2.0-22-generic.efi.signed root=UUID=")
    assert env.driver_params["EnableMSI"] == "1" and env.driver_params["RegistryDwords"] == ""
    assert len(env.driver_params) == 19
    assert (env.runfile_version, env.runfile_result) == ("352.39", "failed")
    assert env.runfile_lines[-1].startswith("ERROR: Installation has failed.")
    assert snapshot.install is not None and snapshot.install.kernel_cmdline_blacklisted == ()
    assert "/proc/cmdline" in snapshot.sources["host_env"] and "params" in snapshot.sources["host_env"]


def test_bug_report_runs_the_checks_that_read_it():
    snapshot, _ = analyze_texts([(BUG_REPORT, decode_bytes("r", (CORPUS / BUG_REPORT).read_bytes()))])
    # 352.63 reports EnablePCIeGen3: 0; a site that wants Gen3 on gets a finding, one that wants MSI does not
    report = run_checks(snapshot, Expectations(driver_params={"EnableMSI": 1, "NVreg_EnablePCIeGen3": 1}))
    skipped = {s.code: s.reason for s in report.skipped}
    for code in ("GH501", "GH508", "GH804"):  # kernel command line, display settings, driver parameters
        assert code not in skipped, f"{code} skipped: {skipped.get(code)}"
    (gen3,) = [f for f in report.findings if f.code == "GH804"]
    assert "EnablePCIeGen3 is 0" in gen3.message and gen3.evidence[0].source == "/proc/driver/nvidia/params"
    assert not [f for f in report.findings if f.code in ("GH501", "GH508", "GH509")]  # a desktop with nvidia loaded
    # what a bug report does not hold is named, not passed
    assert skipped["GH509"] == "the installed nvidia packages (dpkg-query / rpm -qa): not in the evidence given"
    assert "not in the evidence given" in skipped["GH805"]


@pytest.mark.parametrize(("text", "kind"), [
    ("SecureBoot enabled\n", "mokutil"),
    ("SecureBoot enabled\nSecureBoot validation is disabled in shim\n", "mokutil"),
    ("EFI variables are not supported on this system\n", "mokutil"),
    ("nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed\nnvidia/535.161.08, 5.15.0-88-generic, x86_64: built\n",
     "dkms-status"),
    ("nvidia, 470.223.02, 3.10.0-1160.el7.x86_64, x86_64: installed\n", "dkms-status"),
    ("BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-362.8.1.el9_3.x86_64 root=/dev/mapper/rl-root ro "
     "rd.driver.blacklist=nouveau modprobe.blacklist=nouveau nouveau.modeset=0\n", "kernel-cmdline"),
    ("[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz root=UUID=1 ro quiet\n", "kernel-log"),
    ("EnableMSI: 1\nModifyDeviceFiles: 1\nEnableGpuFirmware: 18\nRegistryDwords: \"\"\n", "driver-params"),
    ("Model: \t\t GeForce GTX TITAN X\nIRQ:   \t\t 50\nVideo BIOS: \t 84.00.1f.00.01\n", None),
])
def test_install_evidence_is_recognised(text, kind):
    assert identify(text) == kind


def test_pasted_install_evidence_runs_the_install_checks():
    """mokutil, dkms status and /proc/cmdline pasted with lspci and lsmod of a host whose driver is not loaded."""
    lspci = (CORPUS / "nvidia-bug-report-352.63/lspci_-nn.txt").read_text()
    texts = [("lspci.txt", lspci), ("lsmod.txt", "Module                  Size  Used by\nnouveau  2248704  1\n"),
             ("mokutil.txt", "SecureBoot enabled\n"),
             ("dkms.txt", "nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed\n"),
             ("cmdline.txt", "BOOT_IMAGE=/boot/vmlinuz-5.15.0-105-generic root=UUID=1 ro modprobe.blacklist=nouveau "
                             "nouveau.modeset=0\n")]
    snapshot, recognised = analyze_texts(texts)
    assert [r.kind for r in recognised] == ["lspci", "lsmod", "mokutil", "dkms-status", "kernel-cmdline"]
    install = snapshot.install
    assert install.secure_boot == "enabled" and install.secure_boot_source == "mokutil --sb-state"
    assert [(e.module, e.version, e.kernel, e.installed) for e in install.dkms] == [
        ("nvidia", "535.161.08", "5.15.0-105-generic", True)]
    assert install.kernel_cmdline_blacklisted == ("nouveau",) and install.kernel_cmdline_nouveau_options == "modeset=0"
    report = run_checks(snapshot)
    fired = {f.code: f.severity for f in report.findings}
    skipped = {s.code: s.reason for s in report.skipped}
    assert fired["GH506"] is Severity.WARNING  # Secure Boot on, nvidia not loaded: the module must be signed
    assert "GH506" not in skipped
    assert "the installed kernels: not in the evidence given" in skipped["GH507"]


# nvidia-smi's MIG warning (NVIDIA/gpu-operator#118): its second output line starts with a PCI address, so the
# block looks like an lspci listing to the router; lspci cannot parse it.
_MIG_PENDING = ("$ nvidia-smi -mig DISABLED\n"
                "Warning: MIG mode is in pending disable state for GPU 00000000:C1:00.0:In use by another client\n"
                "00000000:C1:00.0 is currently being used by one or more other processes (e.g. CUDA application or a "
                "monitoring application such as another instance of nvidia-smi). Please first kill all processes "
                "using the device and retry the command or reboot the system to make MIG mode effective.\n"
                "All done.\n")


def test_a_block_that_fails_to_parse_as_a_listing_is_scanned_like_text():
    snapshot, recognised = analyze_texts([("session.txt", _MIG_PENDING)])
    assert [(r.kind, r.note.startswith("could not parse")) for r in recognised] == [("lspci", True)]
    assert [m.signature for m in snapshot.messages] == ["mig-pending-disable"]
    report = run_checks(snapshot)
    assert [f.code for f in report.findings if f.severity is not Severity.INFO] == ["GH409"]
    assert "session.txt" not in " ".join(snapshot.unrecognized_files)


def test_a_listing_that_parses_is_still_left_to_its_parser():
    """The near miss: a real lspci listing still parses, its own lines are values (a device named "... ERROR
    Registers" is no error line), and a catalogue line pasted with it is read as a line no check saw."""
    lspci = (CORPUS / "nvidia-bug-report-352.63/lspci_-nn.txt").read_text()
    line = "Warning: MIG mode is in pending disable state for GPU 00000000:C1:00.0:In use by another client\n"
    snapshot, recognised = analyze_texts([("lspci.txt", lspci)])
    assert [r.kind for r in recognised] == ["lspci"] and not recognised[0].note
    assert not snapshot.messages
    snapshot, recognised = analyze_texts([("lspci.txt", lspci + line)])
    assert [r.kind for r in recognised] == ["lspci"] and not recognised[0].note
    assert [(m.signature, m.read_into) for m in snapshot.messages] == [("mig-pending-disable", ())]
