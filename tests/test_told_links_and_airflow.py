"""GPUs told to sit behind extension cables, in slots wired narrower than they look or hung off the chipset
(knowledge/cause_phrases.csv told-gpus-on-risers and told-narrow-pcie-slot: a riser or extension cable by any name,
a full-length slot wired x4 or x1, board vendors' and HEAVY.AI's slot-width guidance), and a passively cooled
data-centre board told to sit in a NAS or a small box (told-passive-card-in-desktop, NVIDIA's product briefs: the
passive heat sink requires system airflow). Each leads as the reporter's words, a warning. The sentences are
written for these tests (hand-written, no case's text)."""

from __future__ import annotations

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.model import Severity
from gpuhealth.parsers.prose_symptoms import told_symptoms


def findings_of(words: str):
    return run_checks(analyze_texts([("notes.txt", words + "\n")])[0]).findings


@pytest.mark.parametrize("words, code", [
    ("All-reduce hangs after a few minutes; GPUs 2 and 3 hang off PCIe extension cables.", "GH407"),
    ("The job stalls whenever the card on the OCuLink adapter joins the NCCL ring.", "GH407"),
    ("On this board the third x16 slot runs at x4, and the training with that GPU hangs.", "GH407"),
    ("Two of our GPUs are in chipset-connected slots and DDP is very slow between them.", "GH407"),
    ("四张卡里有两张接在 PCIe 延长线上，DDP 训练跑一会儿就卡死。", "GH407"),
    ("那张卡插在 1x 的卡槽上，NCCL 带宽很低。", "GH407"),
    ("Our Tesla T4 sits in a home server with no extra fans and overheats within minutes.", "GH406"),
    ("The P40 inside my Unraid box throttles as soon as a job starts.", "GH406"),
])
def test_the_link_or_the_airflow_told_in_words_leads_as_a_warning(words, code):
    findings = findings_of(words)
    first = findings[0]
    assert first.code == code, [(f.code, f.message) for f in findings]
    assert first.severity is Severity.WARNING and first.labels.get("reported") == "words"


@pytest.mark.parametrize("words, cause", [
    ("The GPUs are on x16 extension cables and training hangs.", "pcie-link-degraded"),
    ("Both GPUs are in CPU-attached x16 slots running at x16 and NCCL hangs.", "pcie-link-degraded"),
    ("If a GPU is in a chipset slot, all-reduce may be slow.", "pcie-link-degraded"),
    ("显卡用的是 x16 的延长线，训练卡住了。", "pcie-link-degraded"),
    ("如果显卡接在延长线上，多卡训练可能会卡住。", "pcie-link-degraded"),
    ("The Tesla T4 in our Dell rack server runs at 50 C.", "passive-gpu-without-airflow"),
    ("If a Tesla P4 sits in a NAS, it may overheat.", "passive-gpu-without-airflow"),
])
def test_a_wide_link_a_server_or_a_hypothetical_is_not_the_cause(words, cause):
    assert cause not in [t.cause for t in told_symptoms(words)]
