"""Packages a person says they installed or removed: reported package facts the checks judge (GH509, GH603, GH605).

Every sentence here is written for this test (hand-made, no case of tests/cases), in the distributions' package
names: Ubuntu's nvidia-driver-<branch> and nvidia-dkms-<branch>, the CUDA repository's cuda-toolkit-X-Y and
cuda-compat-X-Y, ELRepo's kmod-nvidia, pip's torch==<version>+cu<XY>, the .run installer.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.prose import package_statements
from gpuhealth.report.common import fold

sys.path.insert(0, str(Path(__file__).parent))
from test_forward_compat import ERROR_804, smi  # noqa: E402


def stated(text: str) -> list[tuple[str, bool]]:
    return [(s.name, s.present) for s in package_statements(text)]


def snapshot_of(*texts: str):
    snapshot, _ = analyze_texts([(f"paste{i}.txt", t) for i, t in enumerate(texts)])
    return snapshot


def test_installed_had_and_removed_packages_are_read_with_what_happened():
    assert stated("I installed cuda-toolkit-12.5 and cuda-compat-12.9.") == [("cuda-toolkit-12-5", True),
                                                                            ("cuda-compat-12-9", True)]
    assert stated("I have nvidia-driver-535 and nvidia-dkms-535 installed.") == [("nvidia-driver-535", True),
                                                                                ("nvidia-dkms-535", True)]
    assert stated("It fails after apt install nvidia-container-toolkit.") == [("nvidia-container-toolkit", True)]
    assert stated("I removed cuda-compat and it works.") == [("cuda-compat", False)]
    assert stated("I removed nvidia-driver-470 and installed nvidia-driver-550-server-open.") == [
        ("nvidia-driver-470", False), ("nvidia-driver-550-server-open", True)]
    assert stated("I upgraded from nvidia-driver-470 to nvidia-driver-535.") == [("nvidia-driver-535", True)]
    assert stated("cuda-compat-12-9 is not installed on it.") == [("cuda-compat-12-9", False)]
    pip = package_statements("I pip installed torch==2.3.0+cu121 yesterday.")
    assert [(s.name, s.version, s.manager) for s in pip] == [("torch", "2.3.0+cu121", "pip")]
    run = package_statements("I installed the 550.54.15 runfile.")
    assert [(s.name, s.version, s.manager) for s in run] == [("nvidia-runfile", "550.54.15", "runfile")]


def test_a_release_with_dots_or_dashes_is_one_package_and_the_last_statement_wins():
    assert stated("I installed cuda-compat-12-9. Then I removed cuda-compat-12.9 and it works.") == [
        ("cuda-compat-12-9", False)]


def test_questions_conditions_attempts_negations_and_the_past_state_nothing():
    for words in ("should I install cuda-compat?", "Should I install cuda-compat-12-9 on it.",
                  "I did not install cuda-compat.", "I have not installed nvidia-dkms-535.",
                  "before, I had nvidia-driver-470.", "I tried installing nvidia-driver-535.",
                  "I wonder if I should install cuda-compat-12-9.", "If nvidia-dkms-535 is installed, remove it.",
                  "I need to install nvidia-container-toolkit.", "I have to install cuda-drivers on this box.",
                  "nvidia-driver-535 was installed when I got the box.", "sudo apt install cuda-compat-12-9"):
        assert stated(words) == [], words


def test_reported_packages_fill_the_listing_field_marked_as_the_reporters_words():
    snapshot = snapshot_of("I have nvidia-driver-535 and nvidia-dkms-535 installed on this server.")
    assert [p.name for p in snapshot.host_env.packages] == ["nvidia-driver-535", "nvidia-dkms-535"]
    assert snapshot.reported_fact("host_env", "packages") is not None
    assert "reporter's words" in snapshot.host_env.package_source


def test_a_packages_listing_wins_over_the_words():
    listing = ("ii  nvidia-driver-550  550.54.15-0ubuntu1  amd64  NVIDIA driver metapackage\n"
               "ii  libnvidia-compute-550:amd64  550.54.15-0ubuntu1  amd64  NVIDIA libcompute package\n")
    snapshot = snapshot_of(listing, "I have nvidia-driver-470 installed on this server.")
    assert "nvidia-driver-470" not in [p.name for p in snapshot.host_env.packages]
    assert snapshot.reported_fact("host_env", "packages") is None


def test_gh509_judges_a_reported_runfile_beside_reported_packages_at_most_a_warning():
    result = run_checks(snapshot_of("I have nvidia-driver-535 installed, and I also installed the 550.54.15 runfile."))
    found = [f for f in result.findings if f.code == "GH509"]
    assert found and found[0].severity is Severity.WARNING
    assert "run-file installer" in found[0].message
    assert not any("nvidia-uninstall" in e.source for e in found[0].evidence)  # nobody saw that file
    # two branches the words say are installed now; "before, I had" is not one of them
    two = run_checks(snapshot_of("I have nvidia-driver-535 and nvidia-driver-550 installed on it."))
    assert [f.severity for f in two.findings if f.code == "GH509"] == [Severity.WARNING]
    one = run_checks(snapshot_of("Before, I had nvidia-driver-470. Now I have nvidia-driver-550 installed."))
    assert not [f for f in one.findings if f.code == "GH509"]


def test_gh603_judges_a_reported_cuda_compat_beside_error_804():
    session = smi("550.54.15", "12.4", "NVIDIA GeForce RTX 3090") + f"$ python train.py\n{ERROR_804}\n"
    alone = run_checks(snapshot_of(session))
    # the 804 on a GeForce with no container in the evidence: only a compat copy on this host's loader path is loaded
    # there (GH603, which explains GH601's reading of the 804), whichever copy it is
    lead = fold(alone.findings)[0].finding
    assert lead.code == "GH603" and "no container" in lead.message and "GH601" in lead.explains
    result = run_checks(snapshot_of(session, "I installed cuda-compat-12-9 on this server last week."))
    judged = [f for f in result.findings if f.code == "GH603"]
    assert len(judged) == 1 and "cuda-compat-12-9 package" in judged[0].message
    assert "/usr/local/cuda-12.9/compat" in judged[0].message and "not supported on" in judged[0].message
    # the words add the package to the finding and never lower what the machine output showed (the 804 on a GeForce
    # with no container raises GH603 critical by itself)
    assert judged[0].severity is Severity.CRITICAL
    assert "GH601" in judged[0].explains  # a compat package on the host: its removal leads over the driver upgrade
    # without a CUDA error the package alone is not judged: installed, it is on the loader path only when named there
    quiet = run_checks(snapshot_of(smi("550.54.15", "12.4", "NVIDIA GeForce RTX 3090"),
                                   "I installed cuda-compat-12-9 on this server last week."))
    assert not [f for f in quiet.findings if f.code == "GH603"]
    # the words say it is gone, or never say it was installed: no package is judged
    for words in ("I installed cuda-compat-12-9, then I removed cuda-compat and it still fails.",
                  "I did not install cuda-compat-12-9 on this server."):
        result = run_checks(snapshot_of(session, words))
        assert not [f for f in result.findings if "cuda-compat-12-9 package" in f.message], words


def test_a_listed_cuda_compat_package_is_judged_beside_error_804_too():
    listing = ("ii  cuda-compat-12-9  575.51.03-0ubuntu1  amd64  CUDA Compatibility Platform\n"
               "ii  nvidia-driver-550  550.54.15-0ubuntu1  amd64  NVIDIA driver metapackage\n")
    session = smi("550.54.15", "12.4", "NVIDIA GeForce RTX 3090") + f"$ python train.py\n{ERROR_804}\n"
    result = run_checks(snapshot_of(session, listing))
    judged = [f for f in result.findings if f.code == "GH603" and "cuda-compat-12-9 package" in f.message]
    assert judged and judged[0].severity is Severity.CRITICAL  # a program's listing and a program's error
    assert "575.51.03" in judged[0].message
    # the package on the host leads over the 804's driver upgrade: removed, its libcuda leaves the host (and the
    # container toolkit stops injecting it: NVIDIA/nvidia-docker#1515)
    assert fold(result.findings)[0].finding is judged[0] and "GH601" in judged[0].explains
    assert "sudo apt-get remove cuda-compat-12-9" in [f.command for f in judged[0].fixes]


def test_a_reported_torch_wheel_fills_torch():
    snapshot = snapshot_of("I pip installed torch==2.3.0+cpu in my venv.")
    assert snapshot.torch.cuda_available is False and snapshot.reported_fact("torch") is not None


def test_a_version_written_after_the_name_is_the_packages():
    found = package_statements("I have nvidia-driver-535 535.183.01 and libnvidia-compute-550 (550.54.15) installed.")
    assert [(s.name, s.version) for s in found] == [("nvidia-driver-535", "535.183.01"),
                                                    ("libnvidia-compute-550", "550.54.15")]
    pinned = package_statements("I have nvidia-driver-550=550.54.15-0ubuntu1 installed.")
    assert [(s.name, s.version) for s in pinned] == [("nvidia-driver-550", "550.54.15-0ubuntu1")]
    assert [s.version for s in package_statements("I installed nvidia-driver-535 (the server one).")] == [None]
    # two driver versions the words say are installed: GH509's mixed versions, a warning
    result = run_checks(snapshot_of("I have nvidia-driver-535 535.183.01 and libnvidia-compute-550 550.54.15 "
                                    "installed on it."))
    found = [f for f in result.findings if f.code == "GH509"]
    assert [f.severity for f in found] == [Severity.WARNING] and "2 versions" in found[0].message


def test_chinese_sentences_are_read_by_the_same_rules():
    assert stated("我安装了cuda-compat-12-9，然后报错。") == [("cuda-compat-12-9", True)]
    assert stated("我卸载了 cuda-compat 之后就好了。") == [("cuda-compat", False)]
    for words in ("我没有安装cuda-compat-12-9。", "是否需要安装 cuda-compat-12-9", "我打算安装nvidia-driver-535。"):
        assert stated(words) == [], words


def test_when_with_a_past_verb_tells_what_happened():
    # "when I installed X, ..." is a time, not a condition; the verb acting on another object says nothing of X
    assert stated("When I installed both cuda-toolkit-12.5 and cuda-compat-12.9, the build worked but running "
                  "failed.") == [("cuda-toolkit-12-5", True), ("cuda-compat-12-9", True)]
    for words in ("When I install cuda-compat-12-9 it fails.", "If I installed cuda-compat-12-9, would it work?",
                  "When I removed the environment variable for cuda-compat-12.9, the error went away.",
                  "I deleted the symlink of cuda-toolkit-12-4."):
        assert stated(words) == [], words


def test_a_compat_package_told_beside_error_803_leads():
    words = ("When I installed cuda-compat-12.8 and set LD_LIBRARY_PATH, the build worked but running it failed:\n"
             "CUDA error: system has unsupported display driver / cuda driver combination\n")
    result = run_checks(snapshot_of(words))
    top = fold(result.findings)[0].finding
    assert top.code == "GH603" and "cuda-compat-12-8 package" in top.message and "GH901" in top.explains


def test_a_compat_directory_put_on_ld_library_path_in_words():
    # the CUDA Compatibility guide's own step (the package's directory on LD_LIBRARY_PATH), told rather than shown
    from gpuhealth.parsers.prose import library_path_statements

    told = library_path_statements("I added /usr/local/cuda-12.8/compat to my LD_LIBRARY_PATH for the new CUDA.")
    assert [s.directories for s in told] == [("/usr/local/cuda-12.8/compat",)]
    for words in ("I removed /usr/local/cuda-12.8/compat from LD_LIBRARY_PATH and it works.",
                  "If I add /usr/local/cuda-12.8/compat to LD_LIBRARY_PATH it fails.",
                  "I tried adding /usr/local/cuda-12.8/compat to LD_LIBRARY_PATH.",
                  "I added /usr/local/cuda-12.8/lib64 to my LD_LIBRARY_PATH."):
        assert library_path_statements(words) == (), words
    words = "I set LD_LIBRARY_PATH=/usr/local/cuda-12.8/compat:$LD_LIBRARY_PATH in my .bashrc."
    # no GPU named: the program's output alone reads the 804 as GH601; the words name the directory (GH603)
    session = ("$ cat /proc/driver/nvidia/version\n"
               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
               f"$ python train.py\n{ERROR_804}\n")
    result = run_checks(snapshot_of(session, words))
    top = fold(result.findings)[0].finding
    assert top.code == "GH603" and "/usr/local/cuda-12.8/compat" in top.message and "GH601" in top.explains
    # critical: the program's 804 shows the failure, the words only say which directory
    assert top.severity is Severity.CRITICAL and top.labels.get("reported") == "words"
    # told on a data-center GPU with nothing failing: the guide's intended use, nothing to report
    quiet = run_checks(snapshot_of(smi("535.183.01", "12.2", "NVIDIA H100 80GB HBM3"), words))
    assert not [f for f in quiet.findings if f.code == "GH603"]
