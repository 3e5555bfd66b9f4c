"""The evidence kinds gpuhealth has read since the first `analyze`: nvidia-smi in all its forms, lspci,
lsmod, the kernel log, collect_env, install evidence. Priorities keep the most specific sniff first."""

from __future__ import annotations

import re
from typing import Any

from gpuhealth.evidence.registry import evidence_kind
from gpuhealth.lazyre import guarded_re, has, has_folded, lazy_re
from gpuhealth.model import HostEnvironment, InstallState, P2pEvidence, ParseError
from gpuhealth.parsers.kernel_log import detect_log_format, parse_kernel_log
from gpuhealth.parsers.smi_query import parse_smi_query

INSTALLER_LOG = "/var/log/nvidia-installer.log"
_SMI = r"nvidia-smi\b"
_CAT = r"(?:cat|less|more|head|tail|zcat|grep\b.*?)\s+"

_LSPCI_LINE = lazy_re(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] \S", re.M)
# Most patterns here are guarded (lazyre.guarded_re): every kind above a piece's own sniffs it, and answers no
# with a substring test unless the piece holds the pattern's literal text.
_SMI_LIST_LINE = guarded_re(r"^GPU \d+: .+\(UUID: ", re.M, may=has("(UUID: "))
_CSV_HEADER = lazy_re(r"^\s*[a-z_]+(?:\.[a-z_]+)*(?: \[[^\]]*\])?(?:, *[a-z_]+(?:\.[a-z_]+)*(?: \[[^\]]*\])?)+\s*$")
_PROC_MODULES_LINE = guarded_re(r"^\w+ \d+ \d+ \S+ (?:Live|Loading|Unloading) 0x", re.M,
                                may=has(" Live 0x", " Loading 0x", " Unloading 0x"))
_NVLINK_LINE = guarded_re(r"^\s*Link \d+: ", re.M, may=has("Link "))
_NVLINK_TITLE = guarded_re(r"NVLink information|Nvlink queries", re.I,
                           may=has_folded("nvlink information", "nvlink queries"))
_SMI_QUERY_PRODUCT = guarded_re(r"^\s*Product Name\s+:", re.M, may=has("Product Name"))
_LSMOD_HEADER = guarded_re(r"^Module\s+Size\s+Used by", re.M, may=has("Used by"))
_OS_RELEASE_ID = guarded_re(r"^ID=", re.M, may=has("ID="))
_LSPCI_WORDS = guarded_re(r"controller|bridge|Device", re.I, may=has_folded("controller", "bridge", "device"))
# "host kernel: ..." marks a syslog line; "on kernel: 6.5.0-14-generic" (a DKMS error) names a release.
# "NVRM" where the kernel prints it (a line's start, after a timestamp, "kernel:", a priority or a JSON quote), not
# in prose about the log ("dmesg shows no NVRM errors" is not a kernel log that came out clean)
# The last alternative: a line the kernel printed for a PCI device without the log's timestamp ("pci 0000:01:00.0: BAR 1
# ...", dev_printk's "<driver> <address>: " prefix, drivers/base/core.c), as a person pastes the PCI core's lines.
_KERNEL_HINT = lazy_re(r"(?:^\s*|[\]:>\"]\s{0,4})NVRM\b|\bkernel: (?!\d+\.\d+\.\d)|^\[\s*\d+\.\d+\]|^<\d>\[|"
                       r"^\d,\d+,\d+,|^\s{0,8}(?:pci|pci_bus|pcieport|nvidia) [0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}[:.]",
                       re.M)
# /proc/driver/nvidia/params names every driver carries one of (352.63's file has all of these).
_PARAM_NAMES = {"EnableMSI", "ModifyDeviceFiles", "DeviceFileUID", "DeviceFileGID", "DeviceFileMode",
                "RegistryDwords", "ResmanDebugLevel", "RmLogonRC", "InitializeSystemMemoryAllocations",
                "UsePageAttributeTable", "EnableGpuFirmware", "AssignGpus", "RmMsg"}
_PARAM_LINE = lazy_re(r"^(?P<key>[A-Z][A-Za-z0-9_]*): ?\S*")
# One comma-separated field is ``,[^,:]*`` (no separate ``\s*``: that ambiguity backtracks exponentially
# over a long CSV line that has no colon).
_DKMS_LINE = lazy_re(r"^[\w.+-]+(?:/|,\s*)[\w.+~-]+(?:,[^,:]*)*:\s*(?:added|built|installed|broken)\b")
_DKMS_WORDS = ("added", "built", "installed", "broken")  # a status line holds one of them, after a ":"
_MOKUTIL = lazy_re(r"^\s*SecureBoot (?:enabled|disabled)\s*$|This system doesn't support Secure Boot|"
                      r"EFI variables are not supported on this system|"
                      r"^\s*SecureBoot validation is disabled in shim\s*$|"
                      r"^\s*Platform is in Setup Mode\s*$|^\s*Cannot determine secure boot state\.?\s*$|"
                      r"^\s*Failed to read \"(?:SecureBoot|SetupMode)\" variable: |"
                      r"^(?:SKIP: |CA of )?\S{1,300} is (?:not enrolled|already enrolled|already in the enrollment "
                      r"request|already in db|blocked in dbx|blocked in MokListX|not in MokList)\s*$|"
                      r"^Already in kernel trusted keyring\. Skip \S|^input password: ?$", re.M)
# mokutil --list-enrolled: each key opens with "[key N]" then its "SHA1 Fingerprint:" (lcp/mokutil src/efi_x509.c)
_MOK_LIST = guarded_re(r"^\[key 1\]\s*\n\s*SHA1 Fingerprint: ", re.M, may=has("SHA1 Fingerprint: "))
_CERT_NAME_LINE = guarded_re(r"^(?:Subject|Issuer):.{0,300}\bCN ?=", may=has("CN"))


def _cert_names_only(text: str) -> bool:
    """A listing cut to its certificates' names ("mokutil --list-enrolled | grep Subject"); read as mokutil's only
    where the piece's command says so (module_key_lines), else it stays unread."""
    lines = content_lines(text[:4096])
    return 0 < len(lines) <= 20 and all(_CERT_NAME_LINE.search(line.strip()) for line in lines)
_CMDLINE_KEYS = ("BOOT_IMAGE=", "root=", "initrd=")


def _head(text: str) -> str:
    return text[:8192]


def content_lines(text: str, limit: int = 200) -> list[str]:
    """The non-empty lines of a piece, without the ``*** ls: ...`` lines a bug report puts before a file."""
    return [line for line in text[:65536].splitlines()[:limit] if line.strip() and not line.startswith("*** ")]


def body(text: str) -> str:
    """A piece without the ``*** ls: ...`` lines a bug report puts before each file it copies."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("*** "))


# --------------------------------------------------------------------------- nvidia-smi

@evidence_kind("smi-xml", commands=(_SMI + r".*(?:-x\b|-q?x\b|--xml)",), priority=1000,
               recognise=lambda t: "<nvidia_smi_log" in _head(t))
def _smi_xml(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.smi_xml import parse_smi_xml
    return {"smi": parse_smi_xml(text)}


@evidence_kind("smi-table", commands=(_SMI + r"\s*$",), priority=960,
               recognise=lambda t: "NVIDIA-SMI" in _head(t) and "|" in _head(t))
def _smi_table(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.smi_table import parse_smi_table
    return {"smi": parse_smi_table(text)}


# Some bug reports hold only the page-retirement / row-remapping sections of `nvidia-smi -q`; people paste the
# link block alone (`nvidia-smi -q | grep -A8 "GPU Link Info"`, or `-q -d PCI` from below its GPU header line), or
# the GPUs' fabric registration (`nvidia-smi -q | grep -A2 -i fabric`: "Fabric", then "State : Completed").
_SMI_QUERY_SECTION = guarded_re(r"^\s*(?:Pending Page Blacklist|Remapped Rows|Retired Pages|SRAM Uncorrectable|"
                                r"GPU Link Info\s*$|Fabric\s*\n\s+State\s+: )",
                                re.M, may=has("Pending Page Blacklist", "Remapped Rows", "Retired Pages",
                                              "SRAM Uncorrectable", "GPU Link Info", "Fabric"))


# `nvidia-smi -q | grep -i version`: the host's lines in column 0, padded to the key column before " : "
_SMI_QUERY_VERSION = guarded_re(r"^(?:Driver|KMD|CUDA|CUDA UMD) Version {2,}: \d", re.M, may=has(" Version  "))


def _looks_like_smi_query(text: str) -> bool:
    head = _head(text)
    if "==============NVSMI LOG==============" in head or _SMI_QUERY_PRODUCT.search(head):
        return True
    if _SMI_QUERY_VERSION.search(head):
        return True
    return bool(_SMI_QUERY_SECTION.search(head)) and not _KERNEL_HINT.search(head)


# a line nvidia-smi -q prints: its key padded to the value column (" : " after two or more blanks), at any depth;
# a pasted error line ("Failed to initialize NVML: Unknown Error") has no such padding
_SMI_QUERY_ROW = lazy_re(r"^\s*[A-Za-z][\w /().+#,-]{0,80}? {2,}: ")


def _smi_query_row(line: str) -> bool:
    return _SMI_QUERY_ROW.match(line) is not None


@evidence_kind("smi-query", commands=(_SMI + r".*(?:\s-q\b|--query(?:\s|$)|\s-q[A-Za-z]|\s-a\b)",), priority=950,
               recognise=_looks_like_smi_query, owns=_smi_query_row)
def _smi_query(text: str, source: str) -> dict[str, Any]:
    return {"smi": parse_smi_query(text)}


@evidence_kind("smi-nvlink", commands=(_SMI + r"\s+nvlink\b",), priority=940,
               recognise=lambda t: bool(_NVLINK_LINE.search(_head(t)) or _NVLINK_TITLE.search(_head(t))))
def _smi_nvlink(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.smi_nvlink import parse_smi_nvlink
    return {"nvlink": parse_smi_nvlink(text)}


@evidence_kind("smi-list", commands=(_SMI + r"\s+(?:-L|--list-gpus)\b",), priority=930,
               recognise=lambda t: bool(_SMI_LIST_LINE.search(_head(t))))
def _smi_list(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.smi_list import parse_smi_list
    return {"smi": parse_smi_list(text)}


@evidence_kind("smi-topo", commands=(_SMI + r"\s+topo\s+(?:-m|--matrix)\b",), priority=920,
               recognise=lambda t: "GPU0" in _head(t) and "CPU Affinity" in _head(t))
def _smi_topo(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.smi_topo import parse_smi_topo
    return {"topology": parse_smi_topo(text)}


_TOPO_P2P_CELLS = frozenset({"X", "OK", "CNS", "GNS", "TNS", "NS", "U"})  # nvidia-smi topo -p2p's legend


def _looks_like_topo_p2p(text: str) -> bool:
    """A legend (CNS, "X = Self"), or a matrix whose first row holds only topo -p2p's cells (all OK, no legend)."""
    head = _head(text)
    if "GPU0" not in head:
        return False
    if re.search(r"\bCNS\b|X\s*=\s*Self", text[:65536]):
        return True
    rows = [line.split() for line in head.splitlines()[:4] if line.strip()]
    return len(rows) >= 2 and rows[1][:1] == ["GPU0"] and len(rows[1]) > 2 and set(rows[1][1:]) <= _TOPO_P2P_CELLS


@evidence_kind("smi-topo-p2p", commands=(_SMI + r"\s+topo\s+-p2p\b",), priority=910, recognise=_looks_like_topo_p2p)
def _smi_topo_p2p(text: str, source: str) -> dict[str, Any]:
    """The driver's P2P answer per GPU pair (OK, CNS ...): GH706 reads it; it is not how the GPUs connect (topo -m's
    topology, which GH702 judges), so it is kept apart from it."""
    from gpuhealth.parsers.smi_topo import parse_smi_topo_p2p
    links = parse_smi_topo_p2p(text).links
    m = _TOPO_P2P_CAPABILITY.search(source)
    return {"p2p": P2pEvidence(topo_p2p=links, topo_p2p_capability=_P2P_CAPABILITIES.get(m[1], "") if m else "")}


_TOPO_P2P_CAPABILITY = lazy_re(r"topo\s+-p2p\s+([rwnap])\b")
_P2P_CAPABILITIES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}  # nvidia-smi topo -h


# CUDA samples that test GPU peer-to-peer (NVIDIA/cuda-samples): p2pBandwidthLatencyTest's matrices, simpleP2P's
# peer access lines and data check (parsers/cuda_p2p.py)
_P2P_TEST_WORDS = ("P2P Connectivity Matrix", "P2P=Disabled Bandwidth Matrix", "(Peer-to-Peer) GPU Bandwidth Latency",
                   "Access Peer Device=", "> Peer access from ", "support of peer to peer memory access")


def _p2p_printed(line: str) -> bool:
    from gpuhealth.parsers.cuda_p2p import printed_line
    return printed_line(line)


@evidence_kind("cuda-p2p-test", commands=(r"\S*(?:p2pBandwidthLatencyTest|simpleP2P)\b",), priority=905,
               recognise=lambda t: any(w in _head(t) for w in _P2P_TEST_WORDS), owns=_p2p_printed)
def _cuda_p2p_test(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.cuda_p2p import parse_p2p_test
    return {"p2p": P2pEvidence(tests=(parse_p2p_test(text),))}


def _looks_like_smi_csv(text: str) -> bool:
    first = _head(text).lstrip().split("\n", 1)[0]
    return (("name" in first or "index" in first or "pci.bus_id" in first or "pcie.link." in first)
            and bool(_CSV_HEADER.match(first)))


@evidence_kind("smi-csv", commands=(_SMI + r".*--query-gpu",), priority=900, recognise=_looks_like_smi_csv)
def _smi_csv(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.smi_csv import parse_smi_csv
    return {"smi": parse_smi_csv(text)}


def _looks_like_rig_report(text: str) -> bool:
    from gpuhealth.parsers.rig_report import looks_like_rig_report  # here: few pieces get this far

    return looks_like_rig_report(text)


# club-3090's `bash scripts/report.sh`: its GPU section is nvidia-smi's power and link data, one bullet per GPU
@evidence_kind("rig-report", commands=(r"(?:bash\s+)?\S*scripts/report\.sh\b",), priority=890,
               recognise=_looks_like_rig_report)
def _rig_report(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.rig_report import parse_rig_report
    return {"smi": parse_rig_report(text)}


# --------------------------------------------------------------------------- files under /proc and /etc

def _looks_like_installer_log(text: str) -> bool:
    return any(line.startswith(("nvidia-installer log file", "nvidia-installer command line:"))
               for line in content_lines(_head(text), 12))


@evidence_kind("installer-log", commands=(_CAT + r"\S*nvidia-installer\.log",), priority=990,
               recognise=_looks_like_installer_log)
def _installer_log(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.host_env import parse_installer_log
    version, result, lines = parse_installer_log(body(text))
    return {"host_env": HostEnvironment(runfile_log=INSTALLER_LOG, runfile_version=version, runfile_result=result,
                                        runfile_lines=lines)}


@evidence_kind("collect-env", commands=(r"python\S*\s.*collect_env", r"collect_env"), priority=980,
               recognise=lambda t: "PyTorch version:" in _head(t) and "CUDA" in _head(t))
def _collect_env(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.torch_env import parse_collect_env
    return {"torch": parse_collect_env(text)}


@evidence_kind("proc-version", commands=(_CAT + r"/proc/driver/nvidia/version",), priority=970,
               recognise=lambda t: "NVRM version:" in _head(t) and len(_head(t).splitlines()) <= 4)
def _proc_version(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.proc_nvidia import parse_proc_driver_version
    return {"driver": parse_proc_driver_version(text)}


@evidence_kind("lsmod", commands=(r"lsmod\b", _CAT + r"/proc/modules"), priority=800,
               recognise=lambda t: bool(_LSMOD_HEADER.search(_head(t)) or _PROC_MODULES_LINE.search(_head(t))))
def _lsmod(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.system import parse_proc_modules
    return {"kernel_modules": parse_proc_modules(text)}


@evidence_kind("os-release", commands=(_CAT + r"/etc/(?:os|lsb)-release",), priority=790,
               recognise=lambda t: bool(_OS_RELEASE_ID.search(_head(t))
                                        and re.search(r"^(?:PRETTY_)?NAME=", _head(t), re.M)))
def _os_release(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.system import parse_os_release
    return {"os": parse_os_release(text)}


@evidence_kind("lspci", commands=(r"lspci\b",), priority=780,
               recognise=lambda t: bool(_LSPCI_WORDS.search(_head(t)) and _LSPCI_LINE.search(_head(t))))
def _lspci(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.lspci import parse_lspci
    return {"pci_devices": parse_lspci(text)}


@evidence_kind("mokutil", commands=(r"mokutil\b",), priority=500,
               recognise=lambda t: (len(t) < 4096 and bool(_MOKUTIL.search(t)) and len(content_lines(t)) <= 4)
               or bool(_MOK_LIST.search(t[:4096])) or _cert_names_only(t))
def _mokutil(text: str, source: str) -> dict[str, Any]:
    """``mokutil --sb-state`` (the Secure Boot state), ``mokutil --test-key KEY`` (whether shim trusts the key) or
    ``mokutil --list-enrolled`` (the enrolled keys' names): analyze reads the last two from every piece, so here they
    only make the output count as read."""
    from gpuhealth.evidence.facts import module_key_lines, signing_key_lines
    from gpuhealth.parsers.install import mokutil_unread, mokutil_unread_why, parse_mokutil_sb_state

    text = body(text)
    try:
        state = parse_mokutil_sb_state(text)
    except ParseError:
        unread = mokutil_unread(text)
        if unread:  # mokutil could not read the state: neither enabled nor disabled, and said so
            return {"install": InstallState(), "unavailable": {"install_secure_boot": (
                f"mokutil --sb-state could not read the Secure Boot state ('{unread}': {mokutil_unread_why(unread)})")}}
        key = signing_key_lines(text.splitlines(), source)
        if key:
            return key
        enrolled = module_key_lines(text.splitlines(), source)  # the listing, or a grep of it its command names
        if enrolled and (enrolled["install"].enrolled_keys or enrolled["install"].signing_key_state):
            return enrolled  # the enrolled keys, or those --list-new shows waiting for the MOK manager
        raise
    return {"install": InstallState(secure_boot=state, secure_boot_source="mokutil --sb-state")}


def _looks_like_secureboot_policy(text: str) -> bool:
    """Debian's update-secureboot-policy output: every line its own, one of them one it prints only past its Secure
    Boot check (a line alone such as "All OK, nothing to do." says nothing of whose it is)."""
    from gpuhealth.parsers.install import secureboot_policy_line

    if len(text) > 8192 or ("DKMS" not in text and "Secure Boot" not in text):
        return False
    lines = content_lines(text, 40)
    read = [secureboot_policy_line(line) for line in lines]
    return bool(read) and None not in read and ("enabled" in read or any(
        line.strip().startswith(("Secure Boot not enabled on this system", "Generating a new Secure Boot signing key",
                                 "No DKMS packages installed")) for line in lines))


@evidence_kind("secureboot-policy", commands=(r"update-secureboot-policy\b",), priority=490,
               recognise=_looks_like_secureboot_policy)
def _secureboot_policy(text: str, source: str) -> dict[str, Any]:
    """Debian's ``update-secureboot-policy`` (shim-signed-common): the Secure Boot state its lines imply and its
    verdict on DKMS's key. analyze reads the key's verdict and the modules' signatures from every piece (facts.py,
    the signature catalogue); here the state, which only its own output implies."""
    from gpuhealth.parsers.install import secureboot_policy_line

    lines = content_lines(body(text), 2000)
    read = [(secureboot_policy_line(line), line.strip()) for line in lines]
    if not any(state for state, _ in read):
        raise ParseError("no line of update-secureboot-policy's")
    if "--enable" in source:  # run to turn shim's validation back on: it was off, nothing was enforced
        return {"install": InstallState()}
    if any(line.startswith("Secure Boot not enabled on this system") for _, line in read):
        return {"install": InstallState(secure_boot="disabled", secure_boot_source=f"{source}: Secure Boot not "
                                                                                    "enabled on this system.")}
    shown = next((line for state, line in read if state == "enabled"), None)
    if shown is None:
        return {"install": InstallState()}
    return {"install": InstallState(secure_boot="enabled", secure_boot_source=f"{source}: {shown[:100]}")}


# the power-management parameters (NVIDIA Linux driver README, Configuring Power Management Support): names no other
# listing prints, so the lines `grep -E 'PreserveVideoMemoryAllocations|TemporaryFilePath' .../params` leaves are enough
_PM_PARAMS = {"PreserveVideoMemoryAllocations", "TemporaryFilePath", "EnableS0ixPowerManagement",
              "S0ixPowerManagementVideoMemoryThreshold", "DynamicPowerManagement"}


def _looks_like_params(text: str) -> bool:
    lines = content_lines(_head(text))
    if 0 < len(lines) <= len(_PM_PARAMS) and all((m := _PARAM_LINE.match(line)) and m["key"] in _PM_PARAMS
                                                  for line in lines):
        return True  # a grep for the power-management parameters
    if sum(name in _head(text) for name in _PARAM_NAMES) < 2:
        return False  # two known names must be keys of the head's lines
    lines = content_lines(_head(text))
    keys = [m["key"] for m in map(_PARAM_LINE.match, lines) if m]
    return len(keys) == len(lines) >= 3 and len(_PARAM_NAMES & set(keys)) >= 2


@evidence_kind("driver-params", commands=(_CAT + r"/proc/driver/nvidia/params",), priority=490,
               recognise=_looks_like_params)
def _driver_params(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.host_env import parse_driver_params
    return {"host_env": HostEnvironment(driver_params=parse_driver_params(body(text)))}


def _looks_like_cmdline(text: str) -> bool:
    lines = content_lines(_head(text), 3)
    if len(lines) != 1 or "\x00" in lines[0]:
        return False
    words = lines[0].split()
    return any(w.startswith(_CMDLINE_KEYS) for w in words) and all("=" in w or w.isprintable() for w in words) \
        and not lines[0].lstrip().startswith(("[", "<"))


@evidence_kind("kernel-cmdline", commands=(_CAT + r"/proc/cmdline",), priority=480, recognise=_looks_like_cmdline)
def _kernel_cmdline(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.install import parse_kernel_cmdline_modules
    lines = content_lines(text, 3)
    if not lines:  # (analyze._read_by parses a piece without each line: the one line gone, nothing is left)
        raise ParseError("no kernel command line")
    line = lines[0].strip()
    blacklisted, options = parse_kernel_cmdline_modules(line)
    return {"host_env": HostEnvironment(kernel_cmdline=line),
            "install": InstallState(kernel_cmdline_blacklisted=blacklisted,
                                    kernel_cmdline_nouveau_options=options.get("nouveau"))}


def _looks_like_dkms(text: str) -> bool:
    if ":" not in _head(text) or not any(word in _head(text) for word in _DKMS_WORDS):
        return False  # no line can be a status line
    lines = content_lines(_head(text))
    hits = sum(1 for line in lines if _DKMS_LINE.match(line.strip()))
    return hits >= 1 and hits * 2 >= len(lines)


@evidence_kind("dkms-status", commands=(r"dkms\s+status\b",), priority=470, recognise=_looks_like_dkms)
def _dkms_status(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.install import parse_dkms_status
    # only the status lines: parse_dkms_status's pattern backtracks badly on long lines without a colon
    lines = "\n".join(line.strip() for line in content_lines(text, 1000) if _DKMS_LINE.match(line.strip()))
    return {"install": InstallState(dkms=parse_dkms_status(lines))}


# --------------------------------------------------------------------------- logs

def _timestamped_log(head: str) -> bool:
    try:
        return detect_log_format(head) != "plain"
    except ParseError:
        return False


@evidence_kind("kernel-log", priority=120,
               commands=(r"dmesg\b", r"journalctl\b.*(?:\s-k\b|--dmesg|\s-\w*k)",
                         _CAT + r"/var/log/(?:kern|syslog|messages)"),
               recognise=lambda t: bool(_KERNEL_HINT.search(t[:200_000])) or _timestamped_log(_head(t)))
def _kernel_log(text: str, source: str) -> dict[str, Any]:
    return {"kernel_log": parse_kernel_log(text, source)}


def _looks_like_app_log(text: str) -> bool:
    from gpuhealth.parsers.app_log import looks_like_app_log  # here: most evidence is sniffed before app-log

    return looks_like_app_log(text)


@evidence_kind("app-log", priority=100, recognise=_looks_like_app_log)
def _app_log(text: str, source: str) -> dict[str, Any]:
    from gpuhealth.parsers.app_log import parse_app_log
    return {"app_errors": parse_app_log(text)}
