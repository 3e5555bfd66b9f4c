"""The evidence-kind registry: every kind has a real example it recognises and parses; routing by command."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CORPUS
from fuzzing import FUZZ
from gpuhealth.evidence import KINDS, identify, kinds_for_command, load, normalise_command, route
from gpuhealth.model import ParseError
from listings_data import registry_examples
from repo_paths import REPO

# A real example of every kind: a corpus file, or a line copied from a public thread (named beside it).
INSTALLER_LOG = "nvidia-installer log file '/var/log/nvidia-installer.log'\ncreation time: Tue Dec  1 10:00:00 2020\n"
EXAMPLES: dict[str, str | tuple[str, str]] = {
    "smi-xml": "telegraf-nvidia-smi/a10g.xml",
    "smi-table": "gpud/accelerator_nvidia_query__nvidia-smi.550.90.07.out.0.valid",
    "smi-query": "nvidia-bug-report-352.63/nvidia-smi_-q.txt",
    "smi-nvlink": "azurehpc-health-checks/good_nvlink_status.txt",
    "smi-list": "nvidia-gpu-exporter/list_gpus_8xH100_mig.txt",
    "smi-topo": "ml-engineering/topo-m_8xH100_NV18.txt",
    "smi-topo-p2p": "ml-engineering/topo-p2p-r_8xH100_OK.txt",
    "smi-csv": "netdata-go.d-nvidia-smi/tesla-p100.csv",
    "collect-env": "pytorch-collect-env/pytorch-issue-86556_3090x3_515.65.01.txt",
    "proc-version": "nvidia-bug-report-352.63/proc_driver_nvidia_version.txt",
    "driver-params": "nvidia-bug-report-352.63/proc_driver_nvidia_params.txt",
    "lsmod": "azhpc-diagnostics/lsmod.nvidia.out",
    "lspci": "nvidia-bug-report-352.63/lspci_-nn.txt",
    "kernel-log": "nvidia-bug-report-352.63/dmesg.txt",
    # inline examples, from public threads
    "installer-log": ("nvidia-installer", INSTALLER_LOG + "option version : \nnvidia-installer command line:\n"
                      "    ./nvidia-installer\n"),
    "os-release": ("os-release of Ubuntu 22.04", 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\n'
                   'ID=ubuntu\nID_LIKE=debian\n'),
    "mokutil": ("mokutil --sb-state on a Secure Boot host", "SecureBoot enabled\n"),
    "secureboot-policy": ("hand-written from Debian shim-signed's update-secureboot-policy format strings "
                          "(setup_mok_validation)",
                          "/usr/sbin/update-secureboot-policy: Checking status of DKMS module signing:\n"
                          "  [ OK ] System DKMS key found in /var/lib/dkms/mok.pub\n"
                          "  E: System's DKMS key is NOT installed in MOK.\n"),
    "kernel-cmdline": ("a Rocky 9 /proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-362.8.1.el9_3.x86_64 "
                       "root=/dev/mapper/rl-root ro rd.driver.blacklist=nouveau nouveau.modeset=0\n"),
    "kernel-version": ("cat /proc/version of Ubuntu 16.04 (the form askubuntu.com threads on gcc mismatches quote)",
                       "Linux version 4.4.0-31-generic (buildd@lgw01-16) (gcc version 5.3.1 20160413 (Ubuntu "
                       "5.3.1-14ubuntu2.1) ) #50-Ubuntu SMP Wed Jul 13 00:07:12 UTC 2016\n"),
    "gcc-version": ("gcc --version of Ubuntu 16.04", "gcc (Ubuntu 5.4.0-6ubuntu1~16.04.4) 5.4.0 20160609\n"
                    "Copyright (C) 2015 Free Software Foundation, Inc.\n"),
    "dkms-status": ("dkms status on Ubuntu 22.04", "nvidia/535.161.08, 5.15.0-105-generic, x86_64: installed\n"),
    "rig-report": ("club-3090 rig report of noonghunna/club-3090#353",
                   "## GPU hardware\n\n- **GPU 0:** NVIDIA GeForce RTX 3090 Ti | 24564 MiB | driver 580.159.03 | "
                   "VBIOS 94.02.A0.00.5C | persistence=Disabled\n  - **Power:** limit=450.00 W (default=450.00 W, "
                   "max=480.00 W) | current_draw=27.94 W\n  - **PCIe:** x4 lanes negotiated (GPU max x16, Gen up to 4) "
                   "| bus 00000000:C5:00.0 \u26a0 slot is narrower than GPU capability \u2014 affects load + "
                   "all-reduce bandwidth\n"),
    "fabricmanager-log": ("hand-written in the layout of /var/log/fabricmanager.log (NVIDIA Fabric Manager User Guide; "
                          "DigitalOcean's guide to error 802 quotes such lines)",
                          "[Jun 03 2025 08:14:02] [INFO] [tid 2210] Fabric Manager version 550.127.05 is running with "
                          "the following configuration options\n[Jun 03 2025 08:14:06] [INFO] [tid 2210] Successfully "
                          "configured all the available NVSwitches to route GPU NVLink traffic.\n"),
    "systemctl-is-enabled": ("hand-written in the form systemd's src/systemctl/systemctl-is-enabled.c prints through "
                             "the bus for a unit that is not installed",
                             "Failed to get unit file state for nvidia-suspend.service: No such file or directory\n"),
    "systemctl-show": ("hand-written in the form `systemctl show` prints for a unit that is not installed",
                       "Id=nvidia-fabricmanager.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n"),
    "program-text": ("hand-written: a Dockerfile on NVIDIA's nvidia/cuda base image (its Docker Hub tag form)",
                     "FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04\nRUN apt-get update\n"),
    "cuda-p2p-test": ("hand-written in the form NVIDIA/cuda-samples' p2pBandwidthLatencyTest.cu prints",
                      "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"
                      "Device: 0, NVIDIA RTX A6000, pciBusID: 1, pciDeviceID: 0, pciDomainID:0\n"
                      "Device: 1, NVIDIA RTX A6000, pciBusID: 41, pciDeviceID: 0, pciDomainID:0\n"
                      "Device=0 CAN Access Peer Device=1\nDevice=1 CAN Access Peer Device=0\n"
                      "P2P Connectivity Matrix\n     D\\D     0     1\n     0\t     1     1\n     1\t     1     1\n"),
    "package-log": ("hand-written in the form apt-pkg/deb/dpkgpm.cc writes /var/log/apt/history.log "
                    "(tests/data/package-logs/README.md)",
                    "Start-Date: 2024-05-14  06:25:11\nCommandline: /usr/bin/unattended-upgrade\n"
                    "Upgrade: nvidia-utils-535:amd64 (535.171.04-0ubuntu0.22.04.1, 535.183.01-0ubuntu0.22.04.1)\n"
                    "End-Date: 2024-05-14  06:27:02\n"),
    "app-log": ("hand-written in the form PyTorch prints", "Traceback (most recent call last):\n"
                "  File \"t.py\", line 1, in <module>\nRuntimeError: CUDA error: out of memory\n"),
}

EXAMPLES.update(registry_examples())  # the listings (dpkg -l, env, ldconfig -p ...): tests/listings_data.py


def _example(kind: str) -> str:
    example = EXAMPLES[kind]
    if isinstance(example, tuple):
        return example[1]
    return (CORPUS / example).read_text(errors="replace")


def test_every_kind_has_an_example():
    load()
    missing = sorted(set(KINDS) - set(EXAMPLES))
    assert not missing, f"evidence kinds without a real example in EXAMPLES: {missing}"


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_example_is_recognised_and_parsed(kind):
    text = _example(kind)
    assert identify(text) == kind
    overlays = KINDS[kind].parse(text, "example")
    assert overlays and all(value is not None for value in overlays.values())


@pytest.mark.parametrize(("command", "normal"), [
    ("sudo nvidia-smi -q", "nvidia-smi -q"),
    ("sudo -E /usr/bin/nvidia-smi  -L | head", "nvidia-smi -L"),
    ("LD_LIBRARY_PATH=/usr/local/cuda/lib64 python -c 'import torch'", "python -c import torch"),
    ("lsmod | grep nvidia", "lsmod"),
    ("env CUDA_VISIBLE_DEVICES=0 time dkms status", "dkms status"),
    ("echo 'unbalanced", "echo 'unbalanced"),
    ("", ""),
    # a prefix word with no command after it is the command: `env` prints the environment
    ("env | grep CUDA", "env"), ("sudo env", "env"), ("env -0", "env"), ("env A=1", "env"),
])
def test_normalise_command(command, normal):
    assert normalise_command(command) == normal


def test_env_through_grep_routes_to_the_environment_listing():
    assert "env" in kinds_for_command("env | grep -i cuda")


@pytest.mark.parametrize(("command", "kind"), [
    ("nvidia-smi", "smi-table"), ("nvidia-smi -q", "smi-query"), ("nvidia-smi -q -x", "smi-xml"),
    ("nvidia-smi -L", "smi-list"), ("nvidia-smi topo -m", "smi-topo"), ("sudo dkms status", "dkms-status"),
    ("dmesg | grep -i nvrm", "kernel-log"), ("sudo journalctl -k -b", "kernel-log"), ("lspci -k", "lspci"),
    ("cat /proc/driver/nvidia/version", "proc-version"), ("mokutil --sb-state", "mokutil"),
    ("nvidia-smi --query-gpu=index,name --format=csv", "smi-csv"), ("nvidia-smi topo -p2p r", "smi-topo-p2p"),
    ("cat /var/log/apt/history.log", "package-log"), ("zcat /var/log/apt/history.log.1.gz", "package-log"),
    ("sudo dnf history info 27", "package-log"), ("tail -n 50 /var/log/pacman.log", "package-log"),
    ("./p2pBandwidthLatencyTest", "cuda-p2p-test"), ("sudo ./simpleP2P", "cuda-p2p-test"),
    ("/usr/local/cuda/samples/bin/x86_64/linux/release/p2pBandwidthLatencyTest --p2p_read", "cuda-p2p-test"),
])
def test_commands_claim_their_kind(command, kind):
    assert kinds_for_command(command)[0] == kind


@pytest.mark.parametrize(("pattern", "words"), [
    (r"nvidia-smi\b.*--query-gpu", ("nvidia-smi",)), (r"(?:pip3?|python\S*\s+-m\s+pip)\s+list\b", ("pip", "python")),
    (r"(?:cat|less|grep\b.*?)\s+/proc/cmdline", ("cat", "less", "grep")), (r"a|bc", ("a", "bc")),
    (r"(?:a(?:b|c)|d)e", ("a", "d")), (r"ab?c", ("a",)), (r"crio(?:-status)?\s", ("crio",)),
    (r"(?:bash\s+)?\S*scripts/report\.sh", None), (r"\S*simpleP2P", None), (r"(?:[\w.]+-)*gcc", None),
    (r"(?:a|b)*c", None), (r"(?:a|[b])c", None), (r"a)b", None), (r"(?:ab", None), (r"[ab", None),
])
def test_a_command_patterns_leading_words_are_read_from_its_text(pattern, words):
    from gpuhealth.evidence.registry import _leading_words

    assert _leading_words(pattern) == words


def test_a_guarded_command_pattern_claims_what_its_regex_claims():
    # the guard (the words a command must start with) only spares compiling: every kind claims the same commands
    cases = REPO / "tests" / "cases" / "dev"  # the commands people ran, as they typed them
    commands = [c for c in (line.partition("$ ")[2].strip() for path in sorted(cases.glob("*/*.txt"))
                            for line in path.read_text(errors="replace").splitlines()) if c]
    commands += ["nvidia-smi", "sudo pip3 list", "python3 -m pip freeze", "crio-status config", "pip list", "catalog",
                 "zgrep x /var/log/dpkg.log", "less /proc/cmdline", "lsmodx", "gcc --version", "./simpleP2P"]
    load()
    for kind in KINDS.values():
        for pattern in kind.commands:
            for command in map(normalise_command, commands):
                assert bool(pattern.match(command)) == bool(pattern.compiled.match(command)), (pattern, command)
    assert len(commands) > 50


def test_route_prefers_the_command_then_content():
    # "SecureBoot enabled" after `mokutil --sb-state`: mokutil; a table after a command nobody claims: by content
    assert route("mokutil --sb-state", "SecureBoot enabled\n").name == "mokutil"
    table = _example("smi-table")
    assert route("watch -n1 nvidia-smi", table).name == "smi-table"
    # a command that claims a kind but printed something else: content decides, or nothing
    assert route("nvidia-smi -q", "bash: nvidia-smi: command not found\n") is None


@given(st.text(max_size=300))
@FUZZ
def test_routing_survives_any_text(text):
    for command in (None, text[:40], "nvidia-smi -q", "dkms status"):
        kind = route(command, text)
        if kind is not None:
            try:
                kind.parse(text, "fuzz")
            except ParseError:
                pass
    normalise_command(text)


def test_the_registry_loads_every_module_of_the_package():
    """load() imports the modules KIND_MODULES names (no package scan at start-up): it must name them all."""
    import pkgutil

    import gpuhealth.evidence
    from gpuhealth.evidence.registry import KIND_MODULES

    found = sorted(i.name for i in pkgutil.iter_modules(gpuhealth.evidence.__path__)
                   if not i.name.startswith("_") and i.name != "registry")
    assert list(KIND_MODULES) == found
