"""parsers/prose.py: versions, unit states and PCIe links stated in a person's sentences. Every example here is
written for this test (hand-made sentences in the shapes people use in issue reports), none is a case's text."""

from __future__ import annotations

import pytest

from gpuhealth.knowledge.gpu_pcie import boards_named
from gpuhealth.parsers.prose import pcie_statements, prose_sentences, unit_statements, version_statements


def _versions(text: str) -> dict[str, str]:
    return {s.thing: s.value for s in version_statements(text)}


# ----------------------------------------------------------------------------------------------- versions


@pytest.mark.parametrize(("text", "expected"), [
    ("I have CUDA 11.8 installed and my NVIDIA driver is 535.104.05.", {"cuda": "11.8", "driver": "535.104.05"}),
    ("Setup: CUDA 12.2 with driver 525 on a 3090.", {"cuda": "12.2", "driver": "525"}),
    ("my setup is debian12+nvidia550.54+cuda12.4", {"driver": "550.54", "cuda": "12.4", "distro": "12"}),
    ("- NVIDIA driver version: 550.90.07", {"driver": "550.90.07"}),
    ("- OS: Rocky Linux 9.3", {"distro": "9.3"}),
    ("We are running RHEL 8.6, kernel 4.18.0-372.9.1.el8.x86_64 and nvcc 12.1.",
     {"distro": "8.6", "kernel": "4.18.0-372.9.1.el8.x86_64", "cuda": "12.1"}),
    ("I upgraded the driver from 470 to 545 yesterday and it still fails.", {"driver": "545"}),
    ("The nvidia-smi output shows CUDA Version: 12.4 with Driver Version: 550.54.14.",
     {"driver-cuda": "12.4", "driver": "550.54.14"}),
    ("I use driver 535. It is driver 535.161.08 from the Ubuntu archive.", {"driver": "535.161.08"}),
])
def test_versions_a_person_states(text: str, expected: dict[str, str]) -> None:
    assert _versions(text) == expected


def test_the_distribution_is_named_by_its_os_release_id() -> None:
    (stated,) = [s for s in version_statements("My box is on Ubuntu 22.04.4 LTS now.") if s.thing == "distro"]
    assert (stated.name, stated.value) == ("ubuntu", "22.04")


@pytest.mark.parametrize("text", [
    "Is driver 535 enough for CUDA 12.2?",  # a question
    "Should I install CUDA 12.4 or stay on the current one.",  # a question without its mark
    "CUDA 12.x requires driver 525 or newer.",  # a requirement, not this host
    "You need at least driver 450.80.02 for CUDA 11.",  # a requirement
    "I was using driver 470 before the upgrade.",  # the past
    "Previously we had CUDA 11.3 on this box.",  # the past
    "I tried driver 535 and driver 550 with the same result.",  # two drivers, none said current
    "Same error on driver 535 and on driver 550.",  # two drivers again
    "The wheel was built for CUDA 12.1 and works with driver 530+.",  # built-for and a range
    "DKMS make.log for nvidia-535.98 for kernel 6.5.0-14-generic (x86_64)",  # a program's line, not words
    "/usr/local/cuda-12.1/bin/nvcc",  # a path: the ls / which readers' business
    "The RTX 4090 and the NVIDIA 3090 are both in the box.",  # model numbers are no driver
])
def test_no_version_is_invented(text: str) -> None:
    assert {s.thing for s in version_statements(text)} <= {"distro"}, version_statements(text)
    assert "driver" not in _versions(text) and "cuda" not in _versions(text)


def test_a_statement_made_current_wins_over_the_old_one() -> None:
    text = "We had driver 470 for years. Last week I switched to driver 550 and now nothing starts."
    assert _versions(text)["driver"] == "550"


def test_cuda_driver_is_the_driver_not_cuda() -> None:
    """"my CUDA driver is 570.133.20" names the driver; the CUDA toolkit is another number."""
    assert _versions("My CUDA driver is 570.133.20.") == {"driver": "570.133.20"}


# ----------------------------------------------------------------------------------------------- units


@pytest.mark.parametrize(("text", "unit", "active", "enabled"), [
    ("On this HGX box nvidia-fabricmanager is not installed.", "nvidia-fabricmanager", "inactive", "not-found"),
    ("The fabric manager service isn't running on node 3.", "nvidia-fabricmanager", "inactive", None),
    ("I noticed that nvidia-persistenced is disabled.", "nvidia-persistenced", None, "disabled"),
    ("It turns out the persistence daemon is missing from the image.", "nvidia-persistenced", "inactive",
     "not-found"),
    ("After the update the nvidia-fabricmanager.service failed to start.", "nvidia-fabricmanager", "failed", None),
    ("There is no fabric manager on these nodes.", "nvidia-fabricmanager", "inactive", "not-found"),
    ("docker is not running on the host.", "docker", "inactive", None),
    ("Turns out nvidia-container-toolkit is not installed.", "nvidia-container-toolkit", "inactive", "not-found"),
    ("We found that nvidia-docker2 is missing on the worker.", "nvidia-container-toolkit", "inactive", "not-found"),
])
def test_unit_states_a_person_states(text: str, unit: str, active: str | None, enabled: str | None) -> None:
    (stated,) = unit_statements(text)
    assert (stated.unit, stated.active, stated.enabled) == (unit, active, enabled)


@pytest.mark.parametrize("text", [
    "Is nvidia-fabricmanager installed on the image?",  # a question
    "Do I need fabric manager on an 8x A100 SXM box.",  # a question without its mark
    "Even though nvidia-fabricmanager is installed, CUDA returns 802.",  # it is installed
    "If the fabric manager is not running, CUDA returns error 802.",  # a condition
    "Make sure nvidia-persistenced is not disabled after the upgrade.",  # an instruction
    "The fabric manager was not running, so I started it and it works now.",  # the past
    "nvidia-fabricmanager is active and running.",  # it runs
    "I run docker with --gpus all.",  # no state at all
])
def test_no_unit_state_is_invented(text: str) -> None:
    assert unit_statements(text) == ()


def test_the_toolkit_statement_names_the_engine_the_words_use() -> None:
    (toolkit,) = unit_statements("docker run --gpus all fails here. The NVIDIA Container Toolkit is not installed.")
    assert toolkit.engines == ("docker",)
    stated = {s.unit: s for s in unit_statements("docker is not installed and nvidia-container-toolkit is missing.")}
    assert stated["nvidia-container-toolkit"].engines == ()  # docker is said to be absent: no engine in use


# ----------------------------------------------------------------------------------------------- PCIe


@pytest.mark.parametrize(("text", "gen", "width", "expected"), [
    ("The card is stuck at Gen3 x16 under load.", 3, 16, None),
    ("lspci says the link only trains at 5 GT/s x8.", 2, 8, None),
    ("Our GPU link is x4 instead of x16.", None, 4, 16),
    ("It runs at PCIe 4.0 x8, it should be x16.", 4, 8, 16),
])
def test_pcie_links_a_person_states(text: str, gen: int | None, width: int | None, expected: int | None) -> None:
    (stated,) = pcie_statements(text)
    assert (stated.gen, stated.width, stated.expected_width) == (gen, width, expected)


def test_a_utilisation_in_the_same_sentence_comes_with_the_link() -> None:
    (stated,) = pcie_statements("It stays at Gen1 x16 while training, GPU util at 98% the whole time.")
    assert (stated.gen, stated.busy_pct) == (1, 98.0)
    (stated,) = pcie_statements("It stays at Gen1 x16. Utilization was 98 % before.")
    assert stated.busy_pct is None  # another sentence: not tied to the link


@pytest.mark.parametrize("text", [
    "Does it run at Gen4 x16?",  # a question
    "The board supports PCIe Gen5 x16.",  # the board's capability, no present state
    "The link keeps cycling between 2.5 GT/s and 16 GT/s.",  # changing, no one state
    "We bought 4x L40S for the lab.",  # a count of cards, no link
])
def test_no_pcie_link_is_invented(text: str) -> None:
    assert pcie_statements(text) == ()


def test_boards_are_named_by_the_cited_table_only() -> None:
    assert [b.name for b in boards_named("two RTX PRO 6000 Blackwell cards")] == ["NVIDIA RTX PRO 6000 Blackwell"]
    assert boards_named("an RTX 6000 Ada") == ()  # not the RTX PRO 6000, and no checked row of its own
    assert [b.name for b in boards_named("4x H100 80GB PCIe")] == ["NVIDIA H100 PCIe"]
    assert [b.name for b in boards_named("a Tesla T4 and an H100-PCIe")] == ["NVIDIA H100 PCIe", "Tesla T4"]
    assert boards_named("an H100 SXM5 board") == ()  # its own host link is not in the table
    assert boards_named("two H100 NVL cards") == ()  # no NVIDIA document for it could be checked
    assert boards_named("an L40S") == ()  # likewise: no row rather than an unchecked one


def test_markdown_marks_and_contractions_are_read_through() -> None:
    assert prose_sentences("**Note**: `nvidia-persistenced` isn't running.") == ["Note: nvidia-persistenced is not "
                                                                                 "running."]


# ----------------------------------------------------------------------------------------------- Chinese


@pytest.mark.parametrize(("text", "expected"), [
    ("驱动版本 535.104.05", {"driver": "535.104.05"}),
    ("我的驱动版本是 535.104.05，CUDA 版本是 12.1。", {"driver": "535.104.05", "cuda": "12.1"}),
    ("NVIDIA 驱动 550.54.14，CUDA 用的是 11.8", {"driver": "550.54.14", "cuda": "11.8"}),
    ("驅動版本：550.90.07", {"driver": "550.90.07"}),
    ("驱动从 470 升级到 535 以后还是报错", {"driver": "535"}),
    ("之前驱动是 470，现在驱动是 535", {"driver": "535"}),
    ("nvidia-smi 显示 CUDA 版本是 12.4，驱动版本是 550.54.14", {"driver-cuda": "12.4", "driver": "550.54.14"}),
    ("我的CUDA版本是12.2", {"cuda": "12.2"}),  # no blanks around the Latin word
])
def test_versions_stated_in_chinese(text: str, expected: dict[str, str]) -> None:
    assert _versions(text) == expected


@pytest.mark.parametrize("text", [
    "驱动版本是 535 吗",  # a question without its mark
    "是否需要把驱动升级到 550？",
    "需要驱动 525 以上",  # a requirement
    "最低要求驱动版本 450.80.02",
    "之前用的是 470 驱动",  # the past
    "驱动不是 535",  # a negation
    "如果驱动版本是 470，就要先升级",  # a condition
])
def test_no_version_is_invented_from_chinese(text: str) -> None:
    assert "driver" not in _versions(text) and "cuda" not in _versions(text), version_statements(text)


@pytest.mark.parametrize(("text", "unit", "active", "enabled"), [
    ("没有安装 nvidia-fabricmanager", "nvidia-fabricmanager", "inactive", "not-found"),
    ("没有安装nvidia-fabricmanager，多卡训练起不来", "nvidia-fabricmanager", "inactive", "not-found"),
    ("nvidia-fabricmanager 没有安装", "nvidia-fabricmanager", "inactive", "not-found"),
    ("系统里没有 nvidia-persistenced", "nvidia-persistenced", "inactive", "not-found"),
    ("nvidia-fabricmanager服务起不来", "nvidia-fabricmanager", "inactive", None),
    ("nvidia-persistenced 啟動失敗", "nvidia-persistenced", "failed", None),
    ("nvidia-persistenced 被禁用了", "nvidia-persistenced", None, "disabled"),
])
def test_unit_states_stated_in_chinese(text: str, unit: str, active: str | None, enabled: str | None) -> None:
    (stated,) = unit_statements(text)
    assert (stated.unit, stated.active, stated.enabled) == (unit, active, enabled)


@pytest.mark.parametrize("text", [
    "如果 nvidia-fabricmanager 没有运行，需要启动它",  # a condition
    "是否安装了 nvidia-fabricmanager？",  # a question
    "检查 nvidia-persistenced 有没有启动",
    "nvidia-fabricmanager 之前没有安装，现在装好了",  # the past
    "nvidia-fabricmanager 已经安装并且在运行",
])
def test_no_unit_state_is_invented_from_chinese(text: str) -> None:
    assert unit_statements(text) == ()


@pytest.mark.parametrize(("text", "gen", "width", "expected"), [
    ("GPU 的 PCIe 链路只跑在 Gen2 x16", 2, 16, None),
    ("lspci 显示链路宽度是 x4，本来应该是 x16", None, 4, 16),
    ("PCIe链路是gen3 x8", 3, 8, None),  # no blanks around the Latin words
    ("显卡插在 PCIe 3.0 x4 的槽位上", 3, 4, None),
])
def test_pcie_links_stated_in_chinese(text: str, gen: int | None, width: int | None, expected: int | None) -> None:
    (stated,) = pcie_statements(text)
    assert (stated.gen, stated.width, stated.expected_width) == (gen, width, expected)


@pytest.mark.parametrize("text", [
    "这张卡最高支持 Gen4 x16",  # a maximum
    "如果链路是 x8 就要检查插槽",  # a supposition
    "链路宽度是 x8 吗？",  # a question
    "PCIe 链路时而 x16 时而 x8",  # changing
])
def test_no_pcie_link_is_invented_from_chinese(text: str) -> None:
    assert pcie_statements(text) == ()


def test_chinese_readers_stay_linear() -> None:
    import time

    for unit in ("驱动版本是 535 ", "没有安装 nvidia-fabricmanager\n", "链路是 x8 gen3。", "驱动从 470 升级到 ", "，",
                 "驱动是 535，CUDA 版本是 12.1。\n"):
        text = unit * (200_000 // len(unit))
        start = time.process_time()
        version_statements(text), unit_statements(text), pcie_statements(text)
        assert time.process_time() - start < 2.0, unit
