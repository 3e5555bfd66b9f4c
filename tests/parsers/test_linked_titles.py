"""A linked thread's title read from its address (parsers/linked_titles.py), matched by the catalogue with its
punctuation made optional (knowledge/title_words.py), and what analyze makes of it: the reporter's words, at most a
warning. Every address and sentence here is hand-written (the ids and slugs are made up in the sites' schemes)."""

from __future__ import annotations

import time

import pytest

from gpuhealth.analyze import analyze_texts
from gpuhealth.checks.engine import run_checks
from gpuhealth.knowledge.signatures import most_specific, signatures
from gpuhealth.knowledge.title_words import _loose_regex, _may_match, loose_pattern, match_title, title_words
from gpuhealth.model import Severity
from gpuhealth.parsers.linked_titles import MAX_ADDRESSES, as_sentence, linked_titles


def words(text: str) -> list[str]:
    return [t.words for t in linked_titles(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("see https://stackoverflow.com/questions/111/failed-to-initialize-nvml-unknown-error for it",
     "failed to initialize nvml unknown error"),
    ("https://askubuntu.com/questions/222/nvidia-smi-no-devices-were-found?noredirect=1",
     "nvidia smi no devices were found"),
    ("https://unix.stackexchange.com/questions/333/cuda-driver-version-is-insufficient/444#444",
     "cuda driver version is insufficient"),
    ("https://superuser.com/q/555/gpu-has-fallen-off-the-bus", "gpu has fallen off the bus"),
    ("same as https://forums.developer.nvidia.com/t/couldnt-communicate-with-the-nvidia-driver/98765/4.",
     "couldnt communicate with the nvidia driver"),
    ("[thread](https://discuss.pytorch.org/t/cuda-error-out-of-memory-on-startup/4321)",
     "cuda error out of memory on startup"),
    ("https://www.reddit.com/r/linux/comments/abc12d/nvidia_smi_takes_forever_to_answer/",
     "nvidia smi takes forever to answer"),
    ("https://devtalk.nvidia.com/default/topic/1111/linux/nvidia-smi-no-devices-were-found/",
     "nvidia smi no devices were found"),  # the old forum: a board, then the slug
    ("https://devtalk.nvidia.com/default/topic/2222/gpu-has-fallen-off-the-bus-/", "gpu has fallen off the bus"),
])
def test_the_slug_of_each_sites_scheme_is_read_as_words(text: str, expected: str):
    assert words(text) == [expected]


@pytest.mark.parametrize("text", [
    "https://docs.nvidia.com/deploy/xid-errors/index.html",  # a documentation page: no title slug
    "https://github.com/NVIDIA/nvidia-container-toolkit/issues/1234",  # an issue: a number, no slug
    "https://stackoverflow.com/questions/111",  # a question without its slug
    "https://forums.developer.nvidia.com/t/topic/123",  # one word: Discourse's slug for a title it cannot spell
    "https://devtalk.nvidia.com/default/topic/3333/linux/",  # a board, no slug
    "https://example.com/questions/111/failed-to-initialize-nvml-unknown-error",  # not a Stack Exchange site
    "no address at all: failed to initialize nvml",
])
def test_addresses_without_a_title_slug_yield_nothing(text: str):
    assert linked_titles(text) == []


def test_addresses_are_bounded_and_each_title_kept_once():
    text = " ".join(f"https://stackoverflow.com/questions/{n}/gpu-number-{n}-is-lost" for n in range(50))
    assert len(linked_titles(text)) == MAX_ADDRESSES
    twice = "https://stackoverflow.com/questions/1/a-b-c https://stackoverflow.com/questions/1/a-b-c"
    assert words(twice) == ["a b c"]


def test_a_long_adversarial_line_stays_linear():
    for line in ("https://" * 50_000, "https://stackoverflow.com/questions/1/" + "a-" * 100_000,
                 "https://forums.x/t/" + "a" * 200_000):
        start = time.process_time()
        linked_titles(line)
        assert time.process_time() - start < 0.5


def test_title_words_normalise_like_a_slug():
    assert title_words("Failed to initialize NVML: Driver/library version mismatch") == \
        "failed to initialize nvml driver library version mismatch"
    assert title_words("NVIDIA-SMI couldn't  talk") == "nvidia smi couldnt talk"


def test_a_patterns_punctuation_becomes_optional_and_its_syntax_stays():
    assert loose_pattern("(?i)Driver/library") == "(?i)Driver ?library"
    assert loose_pattern("couldn't") == "couldn ?t"
    assert loose_pattern(r"(?<!Warning: )check\.") == "(?<!Warning: )check ?"  # a lookbehind keeps its width
    assert loose_pattern(r"[0-9a-f:.]{7,16}") == "[0-9a-f:. ]{7,16}"
    assert loose_pattern(r"[\w.+-]+") == r"[\w.+ -]+"
    assert loose_pattern(r"^No devices were found") == "No ?devices ?were ?found"  # a long phrase: no anchor
    assert loose_pattern(r"^error: x") == "^error ? ?x"  # a short one keeps it


@pytest.mark.parametrize(("title", "row"), [
    ("nvidia nvml driver library version mismatch", "nvml-driver-library-mismatch"),
    ("nvidia smi has failed because it couldnt communicate with the nvidia driver", "smi-cannot-communicate"),
    ("ubuntu 24 nvidia smi no devices were found", "smi-no-devices"),
    ("docker could not select device driver with capabilities gpu", "docker-could-not-select-driver"),
])
def test_titles_that_lost_their_punctuation_match_the_catalogues_rows(title: str, row: str):
    sig = match_title(title)
    assert sig is not None and sig.id == row


@pytest.mark.parametrize("title", ["how to install cuda on ubuntu", "how to check cuda version",
                                   "best gpu for deep learning", "nvidia driver 550 on debian 12", "cuda error"])
def test_titles_that_name_no_message_match_nothing(title: str):
    assert match_title(title) is None


def test_almost_every_rows_own_example_is_matched_when_it_becomes_a_slug():
    # the normalisation is general: a row's real line, slugged, is still read by some row (a negated class such as
    # "[^/\s]" around a version is the rare exception)
    rows = signatures()
    matched = sum(match_title(title_words(sig.example)) is not None for sig in rows)
    assert matched >= 0.97 * len(rows)


def _every_row(words: str):
    """match_title's answer with every row's loose pattern tried (no literal prefilter)."""
    return most_specific(signatures(), lambda sig: (regex := _loose_regex(sig.pattern)) and regex.search(words))


def test_the_literal_prefilter_changes_no_title_match():
    # the prefilter skips rows whose literals' letters are absent; it must never skip the row that would be picked:
    # every row's example and summary, slugged, whole and cut to their first words, get the same row either way
    titles = {title_words(text) for sig in signatures() for text in (sig.example, sig.summary)}
    titles |= {" ".join(t.split()[:4]) for t in titles} | {" ".join(t.split()[2:]) for t in titles}
    titles.discard("")
    differing = [t for t in sorted(titles) if match_title(t) != _every_row(t)]
    assert not differing, differing[:5]
    assert sum(match_title(t) is not None for t in titles) > len(signatures())  # the comparison is not all None
    assert _may_match("NVRM: Xid", "nvrm xid 79") and not _may_match("NVRM: Xid", "nvrm only")


def _report(text: str):
    snapshot, _ = analyze_texts([("issue.md", text)])
    return run_checks(snapshot)


def test_a_linked_title_is_the_reporters_words_at_most_a_warning():
    report = _report("I got the error in https://stackoverflow.com/questions/987/nvidia-nvml-driver-library-"
                     "version-mismatch after an upgrade\n")
    found = next(f for f in report.findings if f.code == "GH202")
    assert found.severity is Severity.WARNING
    lines = [line for e in found.evidence for line in e.lines]
    assert any("stackoverflow.com/questions/987" in line and "title of a thread the reporter linked" in line
               for line in lines)
    assert any("the reporter's words" in e.source for e in found.evidence)
    assert report.verdict != "HEALTHY"


def test_a_symptom_title_is_read_by_the_symptom_phrases():
    report = _report("see https://discuss.pytorch.org/t/nvidia-smi-takes-forever-on-a-new-node/5555\n")
    found = next(f for f in report.findings if f.code == "GH604")
    assert found.severity is Severity.WARNING


def test_a_title_asking_by_inversion_is_a_question_not_a_told_symptom():
    # the slug dropped the "?": "is nvidia-smi slow without persistence mode" asks, "nvidia-smi is slow" tells
    assert as_sentence("is nvidia smi slow without persistence mode") == "is nvidia smi slow without persistence mode?"
    assert as_sentence("nvidia smi is slow on a new node") == "nvidia smi is slow on a new node"
    asking = _report("see https://discuss.pytorch.org/t/is-nvidia-smi-slow-without-persistence-mode/5555\n")
    assert "GH604" not in {f.code for f in asking.findings} and asking.verdict != "HEALTHY"
    telling = _report("see https://discuss.pytorch.org/t/nvidia-smi-is-slow-on-a-new-node/5555\n")
    assert "GH604" in {f.code for f in telling.findings}


def test_machine_output_beside_the_link_still_decides():
    report = _report("Failed to initialize NVML: Driver/library version mismatch\n"
                     "like https://stackoverflow.com/questions/987/nvidia-nvml-driver-library-version-mismatch\n")
    assert next(f for f in report.findings if f.code == "GH202").severity is Severity.CRITICAL


def test_links_without_a_message_title_give_no_finding_and_never_healthy():
    report = _report("I followed https://askubuntu.com/questions/42/how-to-install-cuda-on-ubuntu and "
                     "https://docs.nvidia.com/cuda/cuda-installation-guide-linux/index.html, see also "
                     "https://github.com/NVIDIA/nvidia-docker/issues/1234\n")
    assert {f.code for f in report.findings} <= {"GH002", "GH004"}
    assert report.verdict != "HEALTHY"


def test_a_unit_state_in_a_title_is_a_reported_fact_showing_the_address():
    report = _report("same problem as https://forums.developer.nvidia.com/t/nvidia-fabricmanager-is-not-running/777\n")
    found = next(f for f in report.findings if f.code == "GH210")
    assert found.severity is Severity.WARNING
    assert any("forums.developer.nvidia.com/t/nvidia-fabricmanager-is-not-running/777" in line
               for e in found.evidence for line in e.lines)


def test_a_titles_numbers_state_no_version():
    # "535-104" may be 535.104 or 535 and 104: a slug's numbers lost their dots
    snapshot, _ = analyze_texts([("issue.md", "see https://askubuntu.com/questions/8/driver-version-535-104-with-"
                                              "cuda-12-2-on-ubuntu\n")])
    assert snapshot.reported_fact("driver", "version") is None
    assert snapshot.reported_fact("cuda") is None
