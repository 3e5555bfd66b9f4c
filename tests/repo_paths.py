"""Where the repository and its real-data corpus are (no pytest here: examples/make_examples.py uses it too).

The real-data corpus ships inside the repository (tests/data/corpus, licences in each SOURCE.md), so a fresh
clone tests alone; GPUHEALTH_CORPUS points the tests at another copy.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
CORPUS = Path(os.environ.get("GPUHEALTH_CORPUS", DATA / "corpus"))
