"""What every probe shares: the ``Probed`` result and reading a host file as text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpuhealth.host import Host
from gpuhealth.model import CommandRun

T = TypeVar("T")


@dataclass
class Probed:
    """What one probe found: snapshot fields, reasons for missing evidence, and their sources."""

    fields: dict[str, Any] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def in_parallel(host: Host) -> bool:
    """Whether to ask ``host`` several things at once: yes on a live host (a hung command must not delay
    the rest), no on a replayed bundle (``parallel = False``: its answers are files, nothing can hang,
    and threads would only add to the start-up)."""
    return bool(getattr(host, "parallel", True))


def gather(host: Host, calls: dict[str, Callable[[], T]], prefix: str) -> dict[str, T]:
    """Each call's result by name, the calls run in threads when ``in_parallel(host)``. A call's
    exception is raised here, after every call has finished (as the thread pool does)."""
    if not in_parallel(host):
        return {name: call() for name, call in calls.items()}
    from concurrent.futures import ThreadPoolExecutor  # not imported for a bundle: it costs start-up

    with ThreadPoolExecutor(max_workers=max(1, len(calls)), thread_name_prefix=prefix) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        return {name: future.result() for name, future in futures.items()}


def run_commands(host: Host, commands: dict[str, tuple[list[str], float]], prefix: str) -> dict[str, CommandRun]:
    """Run each ``name: (argv, timeout)``; see ``gather``."""
    return gather(host, {name: _runner(host, argv, limit) for name, (argv, limit) in commands.items()}, prefix)


def _runner(host: Host, argv: list[str], limit: float) -> Callable[[], CommandRun]:
    return lambda: host.run(argv, limit)


def read_text(host: Host, path: str) -> tuple[str | None, str | None]:
    """A host file as text, or None and the reason it could not be read."""
    content = host.read(path)
    return content.text, content.error
