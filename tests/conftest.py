"""Shared fixtures: where the real-data corpus lives, and helpers to iterate over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_paths import CORPUS, DATA, REPO

__all__ = ["CORPUS", "DATA", "REPO", "corpus", "corpus_files", "corpus_id"]


def corpus_files(*patterns: str) -> list[Path]:
    """Corpus files matching any glob pattern (relative to the corpus root), sorted.

    Tests parametrize over this, so a file added to the corpus is tested automatically.
    """
    if not CORPUS.is_dir():
        return []
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in CORPUS.glob(pattern) if p.is_file() and p.suffix != ".md")
    return sorted(found)


def corpus_id(path: Path) -> str:
    return str(path.relative_to(CORPUS))


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"corpus not found at {CORPUS}: set GPUHEALTH_CORPUS")
    return CORPUS
