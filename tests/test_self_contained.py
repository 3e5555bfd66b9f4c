"""The repository is self-contained: nothing the tests, benches or tools run reads outside it.

A fresh clone has no sibling folders, so a path to one (the shared corpus the project began with, a
developer's work directory) would fail only for new users. `.ci/run` proves the whole suite from a clone
in an empty directory; this test catches the references cheaply, on every run.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from conftest import CORPUS, DATA, REPO

SCANNED = ("tests", "bench", "src", "examples", "Makefile", "pyproject.toml", ".ci")
SKIP_SUFFIXES = {".png", ".gz", ".pyc", ".ico", ".woff", ".woff2"}
# Captured evidence is quoted as found: a user's log may name a path of its own machine. The code,
# specs and case files that point at evidence are scanned; the evidence itself is not.
EVIDENCE = ("tests/data/", "tests/cases/")
EVIDENCE_SCANNED = {".py", ".toml", ".json"}
# Written in pieces so this file does not match itself.
OUTSIDE = re.compile("|".join([
    re.escape(".." + "/shared"),  # the sibling folder the corpus lived in
    re.escape("/" + "work/"),  # the development machine's work directory
    r'/\s*"' + "shared" + r'"',  # a Path joined with the folder name
    r'"' + "shared" + r'"\s*/',  # the folder name joined with "corpus"
]))


def _files() -> list[Path]:
    """Tracked files when this is a git checkout (what a clone gets), else every file on disk."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *SCANNED], cwd=REPO, capture_output=True,
                             check=True, timeout=30).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.SubprocessError):
        names = [str(p.relative_to(REPO)) for top in SCANNED for p in (REPO / top).rglob("*") if p.is_file()]
        names += [top for top in SCANNED if (REPO / top).is_file()]
    assert names, "no files found to scan"
    return [REPO / n for n in names if Path(n).suffix not in SKIP_SUFFIXES and (REPO / n).is_file()
            and (not n.startswith(EVIDENCE) or Path(n).suffix in EVIDENCE_SCANNED)]


def test_no_file_points_outside_the_repository():
    offenders = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}")
    assert not offenders, "paths outside the repository:\n" + "\n".join(offenders)


def test_the_pattern_catches_what_it_should():
    # The scan is only as good as its pattern: each way of naming the old location must match.
    for line in ['CORPUS = REPO.parent / "' + 'shared" / "corpus"', "see ../" + "shared/corpus/gpud",
                 "FACTS = '/" + "work/shared/reference/facts.md'"]:
        assert OUTSIDE.search(line), line
    assert not OUTSIDE.search("libcudnn.so.9: cannot open shared object file")


def test_the_corpus_is_inside_the_repository():
    # the default location, not an override, is what a fresh clone uses
    if "GPUHEALTH_CORPUS" not in os.environ:
        assert CORPUS == DATA / "corpus"
    assert CORPUS.resolve().is_relative_to(REPO.resolve()) or "GPUHEALTH_CORPUS" in os.environ
    # every source folder keeps its licence note (issue-logs copies nothing: it holds pointers only)
    folders = [d for d in (DATA / "corpus").iterdir() if d.is_dir()]
    assert len(folders) >= 10
    for folder in folders:
        if folder.name == "issue-logs":
            assert (folder / "THREADS.md").is_file()
        else:
            assert "License" in (folder / "SOURCE.md").read_text(encoding="utf-8"), folder
