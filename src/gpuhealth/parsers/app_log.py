"""CUDA, NCCL and driver errors in a training log or Python traceback.

A line is an application error when the signature catalogue (``knowledge/signatures.csv``) matches it
and the row it picks belongs to a kind of ``knowledge/app_errors.csv`` (``no-device``, ``cuda-oom``,
``nccl`` ...): the messages live in the catalogue only, so this parser and `analyze`'s line scan can
never disagree on what a line is.
"""

from __future__ import annotations

import re

from gpuhealth.knowledge.app_errors import candidate_lines, kind_of_line
from gpuhealth.lazyre import lazy_re
from gpuhealth.model import AppError, ParseError

_TRACEBACK = lazy_re(r"^Traceback \(most recent call last\):", re.MULTILINE)
_MAX_MESSAGE = 500


def parse_app_log(text: str) -> tuple[AppError, ...]:
    """Every line that shows a known CUDA/NCCL/driver error: its kind, the line (trimmed) and its
    1-based line number. An ordinary log with no such errors gives ``()``; ParseError only for
    input that is not text."""
    if not isinstance(text, str):
        raise ParseError("application log must be text")
    errors: list[AppError] = []
    for number, line in candidate_lines(text.replace("\r\n", "\n")):
        kind = kind_of_line(line)
        if kind is not None:
            errors.append(AppError(kind=kind, message=line.strip()[:_MAX_MESSAGE], line_number=number))
    return tuple(errors)


def looks_like_app_log(text: str) -> bool:
    """True for a Python traceback or text containing any of the known error messages."""
    if not isinstance(text, str):
        return False
    if _TRACEBACK.search(text):
        return True
    return any(kind_of_line(line) for _, line in candidate_lines(text.replace("\r\n", "\n")))
