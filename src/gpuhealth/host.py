"""The one seam to the host: every file read and every command run goes through a ``Host``.

``LocalHost`` reads the real machine, ``BundleHost`` replays a captured bundle, ``RecordingHost`` wraps a
live host and writes every answer into a bundle. Because live and offline runs ask the same questions
through the same interface, they produce the same snapshot and the same findings.

Nothing here raises for ordinary trouble: "not installed", "permission denied" and "timed out" are
answers, carried in the returned objects.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from gpuhealth.model import CommandRun

DEFAULT_TIMEOUT_S = 10.0
MAX_READ_BYTES = 64 * 1024 * 1024  # a kernel log can be large; a host file larger than this is cut
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
READ_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class FileContent:
    """A file's bytes, or why they could not be read (``error``)."""

    path: str
    data: bytes | None = None
    error: str | None = None

    @property
    def text(self) -> str | None:
        return None if self.data is None else self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Listing:
    path: str
    names: tuple[str, ...] | None = None
    error: str | None = None


@dataclass(frozen=True)
class FileStat:
    path: str
    mtime: float | None = None
    size: int | None = None
    is_dir: bool | None = None
    error: str | None = None


class Host(Protocol):
    """What collection may ask of a machine."""

    def read(self, path: str) -> FileContent: ...
    def listdir(self, path: str) -> Listing: ...
    def readlink(self, path: str) -> str | None: ...
    def stat(self, path: str) -> FileStat: ...
    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandRun: ...
    def nvml(self) -> dict[str, Any]: ...
    def environment(self) -> dict[str, str]: ...


def explain_os_error(path: str, exc: OSError) -> str:
    """A reason a person can act on: what failed and, where there is one, the fix."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        if path.startswith("/var/log"):
            return "permission denied: run as root, or add the user to group adm"
        return "permission denied: run as root (sudo)"
    if exc.errno == errno.ENOENT:
        return "not present"
    if exc.errno == errno.ENOTDIR:
        return "not a directory"
    return exc.strerror or str(exc)


class LocalHost:
    """The real machine, read under ``root`` (``/`` unless a test points it at a fake tree)."""

    def __init__(self, root: str = "/", nvml_timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.root = root.rstrip("/") or ""
        self.nvml_timeout = nvml_timeout

    def _real(self, path: str) -> str:
        return self.root + path

    def read(self, path: str) -> FileContent:
        try:
            with open(self._real(path), "rb") as handle:
                return FileContent(path, _read_bounded(handle))
        except OSError as exc:
            return FileContent(path, error=explain_os_error(path, exc))

    def listdir(self, path: str) -> Listing:
        try:
            return Listing(path, tuple(sorted(os.listdir(self._real(path)))))
        except OSError as exc:
            return Listing(path, error=explain_os_error(path, exc))

    def readlink(self, path: str) -> str | None:
        try:
            return os.readlink(self._real(path))
        except OSError:
            return None

    def stat(self, path: str) -> FileStat:
        try:
            result = os.stat(self._real(path))
        except OSError as exc:
            return FileStat(path, error=explain_os_error(path, exc))
        return FileStat(path, result.st_mtime, result.st_size, os.path.isdir(self._real(path)))

    def run(self, argv: list[str], timeout: float = DEFAULT_TIMEOUT_S) -> CommandRun:
        return run_command(argv, timeout)

    def nvml(self) -> dict[str, Any]:
        # Imported here so that importing the host module never loads NVML.
        from gpuhealth import nvml

        return nvml.probe_with_timeout(self.nvml_timeout)

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    @staticmethod
    def hostname() -> str:
        return socket.gethostname()


def _read_bounded(handle: BinaryIO) -> bytes:
    """Read in modest chunks: /proc/sys files fail with ENOMEM when asked for a huge read at once."""
    chunks = []
    total = 0
    while total < MAX_READ_BYTES:
        chunk = handle.read(min(READ_CHUNK, MAX_READ_BYTES - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def run_command(argv: list[str], timeout: float) -> CommandRun:
    """Run ``argv`` with a timeout; a hung command is killed with its whole process group."""
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, start_new_session=True,
        )
    except FileNotFoundError:
        return CommandRun(tuple(argv), None, error="not installed")
    except PermissionError:
        return CommandRun(tuple(argv), None, error="permission denied")
    except OSError as exc:
        return CommandRun(tuple(argv), None, error=exc.strerror or str(exc))
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        timed_out = True
    duration = round(time.monotonic() - started, 3)
    return CommandRun(
        tuple(argv),
        None if timed_out else process.returncode,
        stdout[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace"),
        stderr[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace"),
        duration,
        timed_out,
        f"timed out after {timeout:g} s" if timed_out else None,
    )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
