"""How many NVIDIA GPUs this host last had on its PCI bus, kept between runs (``check --gpu-state FILE``).

Why: a node whose GPUs have all left the PCI bus looks like a machine without GPUs (GH101), which is the truth on
a CPU-only node and must never drain it. Without ``gpu_count`` in the configuration, only a memory of the GPUs it
had tells the two apart: the Slurm wrapper (deploy/slurm/gpuhealth-nhc.sh) passes ``--gpu-state`` with a file
beside the monitor's history (/var/lib/gpuhealth/gpus-seen), so a node whose GPUs vanished stays drained.

The file is one small JSON object, ``{"gpus": 8, "seen_at": "2026-12-07T03:00:00+0000"}``, written only when GPUs
are on the bus (a count of 0 never overwrites the memory), through ``safefile.write_file`` (a new file renamed into
place; a link or another user's file there is refused). It is read with ``O_NOFOLLOW``, at most ``MAX_BYTES``.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from gpuhealth.exits import CannotRun
from gpuhealth.records import record

MAX_BYTES = 4096


@record
class SeenGpus:
    """The NVIDIA GPUs last seen on the PCI bus: how many, and when (the snapshot's time)."""

    count: int
    seen_at: str = ""


def read(path: Path) -> SeenGpus | None:
    """The remembered count, or None when the file does not exist yet. A file that is not ours to read (a link,
    not a regular file) or not what gpuhealth writes is CannotRun: one line naming the file and why."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "is a symbolic link; refused" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise CannotRun(f"{path}: {why}") from exc
    with os.fdopen(fd, "rb") as handle:
        if not _regular(handle.fileno()):
            raise CannotRun(f"{path}: is not a regular file; refused")
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise CannotRun(f"{path}: larger than {MAX_BYTES} bytes: not a gpuhealth GPU state file")
    try:
        document = json.loads(data.decode("utf-8"))
        count, seen_at = document["gpus"], document.get("seen_at", "")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or not isinstance(seen_at, str):
            raise ValueError("gpus must be a count and seen_at a time")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CannotRun(f"{path}: not a gpuhealth GPU state file ({exc}): remove it to start again") from exc
    return SeenGpus(count, seen_at)


def remember(path: Path, count: int, seen_at: str) -> None:
    """Keep ``count`` GPUs seen at ``seen_at``; a count of 0 keeps the memory of the GPUs the host had."""
    if count <= 0:
        return
    from gpuhealth import safefile

    try:
        if not path.parent.exists():  # a fresh node: /var/lib/gpuhealth is made by whichever gpuhealth runs first
            safefile.make_directory(path.parent, 0o755)
        safefile.write_file(path, json.dumps({"gpus": count, "seen_at": seen_at}) + "\n", mode=0o644)
    except OSError as exc:
        raise CannotRun(f"{exc.filename or path}: {exc.strerror or exc}") from exc


def _regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)
